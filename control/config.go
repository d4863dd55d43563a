package control

import (
	"github.com/crawlnode/crawlnode/internal/peerauth"

	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("control: invalid config")

// Profiles: timing presets.
const (
	ProfileLAN  = "lan"  // raft.DefaultConfig timings: 1 s heartbeat/election timeout
	ProfileTest = "test" // fast timings for in-process test clusters on loopback
)

// Config builds a Control. Zero fields take the defaults of Profile (see WithDefaults).
type Config struct {
	// NodeName is the Raft server ID and member name. Required. It must be stable across
	// restarts (the design persists it in the data directory), or a restarted node is a
	// new member.
	NodeName string

	// RaftBindAddr is the TCP address the Raft transport listens on ("host:port").
	// Required unless Transport is set. Port 0 picks a free port (tests).
	RaftBindAddr string

	// RaftAdvertise is the address peers dial (host:port, an IP literal). Default: the
	// listener's address, which must then not be a wildcard (0.0.0.0).
	RaftAdvertise string

	// TLS, when set, runs the Raft transport over mutual TLS with these credentials: every
	// connection is authenticated by the cluster's CA, and a request whose sender's server
	// ID is not the node name its certificate carries is refused (tlsstream.go). nil:
	// plain TCP (loopback clusters, --insecure-cluster). Ignored with Transport.
	TLS *peerauth.Creds

	// HTTPAddr is this node's HTTP address, stored in the member registry so that a node
	// that gets ErrNotLeader can forward to the leader. Optional.
	HTTPAddr string

	// DataDir holds raft/ (raft-wal log and stable store) and snapshots/. Required.
	DataDir string

	// BootstrapExpect: 0 = never bootstrap (join a cluster whose leader adds this node);
	// 1 = bootstrap a single-node cluster at Start; N > 1 = Bootstrap(peers) once the
	// caller has seen N members, and only the lowest-named of them bootstraps.
	BootstrapExpect int

	// Voters is the number of voting members (default 3). More voters survive more
	// failures but every commit waits for a majority of them. Even targets are rounded
	// down (4 voters tolerate no more failures than 3). Capped by the member count.
	Voters int
	// LargeVoters (default 5) replaces Voters once the cluster has LargeClusterSize
	// members (default 7; negative disables the switch).
	LargeVoters      int
	LargeClusterSize int

	// Profile is ProfileLAN (default) or ProfileTest; it picks the Raft timings and the
	// defaults of the durations below.
	Profile string

	// LeaseTimeout is how recently this node must have heard from the leader (a leader:
	// confirmed its leadership with a quorum) for Owns to answer true. Default 5 s (lan),
	// 750 ms (test). Shorter fences a cut-off node sooner, but pauses fetching on every
	// slow election; the ForceLease grace period must be much longer than this. Must
	// exceed the Raft heartbeat timeout (1 s lan, 150 ms test).
	LeaseTimeout time.Duration

	// ApplyTimeout bounds how long Apply waits to enqueue and commit. Default 5 s (lan),
	// 2 s (test).
	ApplyTimeout time.Duration

	// SnapshotRetain is how many snapshots to keep on disk. Default 2.
	SnapshotRetain int

	// Logger receives the control and Raft logs. Default slog.Default().
	Logger *slog.Logger

	// Now is the clock for lease freshness and the times written into commands. Default
	// time.Now. Raft itself runs on the real clock (LastContact), so Now must be a real
	// clock wherever Raft runs; a fake clock only suits the pure FSM.
	Now func() time.Time

	// Transport, if set, replaces the TCP transport (tests: raft.InmemTransport).
	// Control closes it on Shutdown.
	Transport raft.Transport
}

// WithDefaults returns c with zero fields set from its profile.
func (c Config) WithDefaults() Config {
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	test := c.Profile == ProfileTest
	if c.Voters == 0 {
		c.Voters = 3
	}
	if c.LargeVoters == 0 {
		c.LargeVoters = 5
	}
	if c.LargeClusterSize == 0 {
		c.LargeClusterSize = 7
	}
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = 5 * time.Second
		if test {
			c.LeaseTimeout = 750 * time.Millisecond
		}
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 5 * time.Second
		if test {
			c.ApplyTimeout = 2 * time.Second
		}
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = 2
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c (after WithDefaults) can build a Control.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.NodeName == "":
		return fmt.Errorf("%w: node name required", ErrInvalidConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: data dir required", ErrInvalidConfig)
	case c.RaftBindAddr == "" && c.Transport == nil:
		return fmt.Errorf("%w: raft bind address or transport required", ErrInvalidConfig)
	case c.Profile != ProfileLAN && c.Profile != ProfileTest:
		return fmt.Errorf("%w: profile %q", ErrInvalidConfig, c.Profile)
	case c.BootstrapExpect < 0:
		return fmt.Errorf("%w: bootstrap-expect %d < 0", ErrInvalidConfig, c.BootstrapExpect)
	case c.Voters < 1 || c.LargeVoters < 1:
		return fmt.Errorf("%w: voters must be >= 1", ErrInvalidConfig)
	case c.SnapshotRetain < 1:
		return fmt.Errorf("%w: snapshot retain must be >= 1", ErrInvalidConfig)
	case c.ApplyTimeout <= 0:
		return fmt.Errorf("%w: apply timeout must be > 0", ErrInvalidConfig)
	}
	if hb := c.raftConfig().HeartbeatTimeout; c.LeaseTimeout <= hb {
		return fmt.Errorf("%w: lease timeout %v must exceed the raft heartbeat timeout %v",
			ErrInvalidConfig, c.LeaseTimeout, hb)
	}
	return nil
}

// raftConfig returns the Raft configuration of c's profile (c already defaulted).
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeName)
	if c.Profile == ProfileTest {
		rc.HeartbeatTimeout = 150 * time.Millisecond
		rc.ElectionTimeout = 150 * time.Millisecond
		rc.LeaderLeaseTimeout = 100 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
		rc.SnapshotInterval = 100 * time.Millisecond
		rc.SnapshotThreshold = 32
		rc.TrailingLogs = 16
	}
	return rc
}

// VoterTarget is the number of voters a cluster of n members should have: Voters, or
// LargeVoters from LargeClusterSize members on, capped at n and rounded down to odd.
func (c Config) VoterTarget(n int) int {
	c = c.WithDefaults()
	t := c.Voters
	if c.LargeClusterSize > 0 && n >= c.LargeClusterSize {
		t = c.LargeVoters
	}
	t = min(t, n)
	if t > 1 && t%2 == 0 {
		t--
	}
	return max(t, 0)
}
