package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Sentinel errors. Every error this package returns wraps one of them.
var (
	ErrInvalidConfig = errors.New("gossip: invalid config")
	ErrInvalidMeta   = errors.New("gossip: invalid node metadata")
	// ErrMetaTooLarge: the encoded metadata exceeds MaxMetaSize (512 bytes). It also wraps
	// into Validate's result; memberlist would panic on it.
	ErrMetaTooLarge  = errors.New("gossip: node metadata too large")
	ErrJoin          = errors.New("gossip: join failed")
	ErrUpdateTimeout = errors.New("gossip: metadata update not confirmed in time")
	ErrLeave         = errors.New("gossip: leave not confirmed in time")
	ErrShutdown      = errors.New("gossip: shut down")
	ErrLeft          = errors.New("gossip: node has left")
	ErrStarted       = errors.New("gossip: already started")
	// ErrKeyring: a keyring operation was refused (no keyring, bad key length, removing
	// the primary key, using a key not installed).
	ErrKeyring = errors.New("gossip: keyring")
)

// Profiles name a memberlist timing preset.
const (
	// ProfileLAN is memberlist.DefaultLANConfig unchanged except DeadNodeReclaimTime
	// (10 s): probe every 1 s with a 500 ms timeout, gossip every 200 ms to 3 nodes,
	// push/pull every 30 s, suspicion multiplier 4, TCP timeout 10 s. A dead node is
	// declared after roughly 5-25 s in a small cluster; it tolerates GC pauses and a busy
	// host without false deaths.
	ProfileLAN = "lan"
	// ProfileTest is for one process on loopback. See testTimings for the numbers: a hard
	// stop is detected in about 0.2-1.5 s, a metadata change spreads in tens of
	// milliseconds. The cost is many packets (a probe each 50 ms, gossip each 20 ms per
	// node) and a higher chance of a false suspicion on an overloaded machine; memberlist
	// lets the suspected node refute it, so a false *death* needs the node to be stalled
	// for the whole suspicion timeout (at least 150 ms). Never use it across real networks.
	ProfileTest = "test"
)

// Defaults for Config's zero fields.
const (
	DefaultBindAddr    = "0.0.0.0:7946"
	DefaultEventBuffer = 256
	// maxNameLen bounds Config.Name: it travels in every gossip message.
	maxNameLen = 128
)

// Config shapes a Gossip. Zero fields take the defaults of the chosen Profile.
type Config struct {
	// Name identifies the node in the cluster. Required, at most 128 bytes. It must be stable
	// across restarts (the node layer persists it in the data directory): a restarted node
	// with the same name takes over its old identity, a new name is a new member.
	Name string

	// BindAddr is the IP:port to listen on, for both TCP and UDP. Default "0.0.0.0:7946".
	// Port 0 lets the kernel choose one free for both protocols (memberlist retries up to 10
	// times); BoundAddr reports it after New.
	BindAddr string

	// AdvertiseAddr is the IP:port peers should use to reach this node, when it differs from
	// BindAddr (NAT, containers, a 0.0.0.0 bind). Empty: memberlist picks the bind address,
	// or a private interface address for 0.0.0.0. Port 0 means the bound port.
	AdvertiseAddr string

	// Meta is the node's initial metadata. An empty State means StateJoining, a zero Started
	// means the time New runs. It must encode to at most 512 bytes (ErrMetaTooLarge).
	Meta Meta

	// Keys, when not empty, encrypt and authenticate every gossip message (memberlist's
	// keyring: AES-GCM, keys of 16, 24 or 32 bytes). Keys[0] is the primary key, used to
	// send; every key is tried on receipt, so a key can be rotated while the cluster runs
	// (InstallKey everywhere, UseKey, RemoveKey the old one). Messages that are not
	// encrypted with one of them are dropped, in both directions (GossipVerifyIncoming
	// and GossipVerifyOutgoing): a process without the key cannot join. Empty: gossip in
	// the clear (loopback test clusters, --insecure-cluster).
	Keys [][]byte

	// Profile selects the memberlist timing preset: ProfileLAN ("lan", the default) or
	// ProfileTest ("test").
	Profile string

	// EventBuffer is the capacity of the channel between memberlist's callbacks and the event
	// loop, in events. Default 256. It only absorbs bursts while the loop is busy; when it is
	// full a callback records the event in a per-member overflow slot instead (latest wins),
	// so no member's latest state is lost and memberlist never waits.
	EventBuffer int

	// CoalesceWindow is how long the loop gathers events after the first one of a burst
	// before it offers a batch on Events(). Default 100 ms (lan), 10 ms (test). Longer means
	// fewer, larger batches and later reactions (a ring recompute per batch).
	CoalesceWindow time.Duration

	// JoinTimeout bounds Join's retries. Default 60 s (lan), 5 s (test).
	JoinTimeout time.Duration
	// JoinBackoffMin and JoinBackoffMax bound the delay between Join attempts, which doubles
	// from Min to Max. Defaults 200 ms and 5 s (lan), 20 ms and 200 ms (test).
	JoinBackoffMin, JoinBackoffMax time.Duration

	// UpdateTimeout bounds how long SetMeta waits for memberlist to send the update to at
	// least one peer. Default 5 s (lan), 1 s (test). A timeout does not undo the update: it
	// still spreads by gossip and push/pull.
	UpdateTimeout time.Duration

	// ReapAfter is how long a dead or left member stays in Members() before it is forgotten,
	// unless it comes back. Default 24 h (lan), 1 min (test). Longer keeps history for the
	// cluster view; the table grows by one small entry per departed name.
	ReapAfter time.Duration

	// Logger receives this package's logs and memberlist's (mapped to slog levels), with
	// component=gossip and node=Name. Default slog.Default().
	Logger *slog.Logger

	// Now is the clock used for Started and reaping. Default time.Now.
	Now func() time.Time
}

// timings is the part of a profile this package owns (memberlist's part is in mlConfig).
type timings struct {
	coalesce, joinTimeout, backoffMin, backoffMax, update, reap time.Duration
}

var (
	lanTimings  = timings{100 * time.Millisecond, 60 * time.Second, 200 * time.Millisecond, 5 * time.Second, 5 * time.Second, 24 * time.Hour}
	testTimings = timings{10 * time.Millisecond, 5 * time.Second, 20 * time.Millisecond, 200 * time.Millisecond, time.Second, time.Minute}
)

// withDefaults returns c with every zero field set.
func (c Config) withDefaults() Config {
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	t := lanTimings
	if c.Profile == ProfileTest {
		t = testTimings
	}
	if c.BindAddr == "" {
		c.BindAddr = DefaultBindAddr
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.CoalesceWindow, t.coalesce)
	def(&c.JoinTimeout, t.joinTimeout)
	def(&c.JoinBackoffMin, t.backoffMin)
	def(&c.JoinBackoffMax, t.backoffMax)
	def(&c.UpdateTimeout, t.update)
	def(&c.ReapAfter, t.reap)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Meta.State == "" {
		c.Meta.State = StateJoining
	}
	if c.Meta.Started.IsZero() {
		c.Meta.Started = c.Now()
	}
	return c
}

// Validate checks c. Zero fields are accepted where a default exists (New applies them).
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	if c.Name == "" {
		return bad("name is required")
	}
	if len(c.Name) > maxNameLen {
		return bad("name is %d bytes, limit %d", len(c.Name), maxNameLen)
	}
	if c.BindAddr != "" {
		if _, _, err := splitIPPort(c.BindAddr); err != nil {
			return bad("bind address: %v", err)
		}
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort(c.AdvertiseAddr); err != nil {
			return bad("advertise address: %v", err)
		}
	}
	switch c.Profile {
	case "", ProfileLAN, ProfileTest:
	default:
		return bad("unknown profile %q (want %q or %q)", c.Profile, ProfileLAN, ProfileTest)
	}
	for i, k := range c.Keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return bad("cluster key %d is %d bytes; want 16, 24 or 32", i+1, n)
		}
	}
	if c.EventBuffer < 0 {
		return bad("event buffer %d < 0", c.EventBuffer)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"coalesce window", c.CoalesceWindow}, {"join timeout", c.JoinTimeout}, {"join backoff min", c.JoinBackoffMin},
		{"join backoff max", c.JoinBackoffMax}, {"update timeout", c.UpdateTimeout}, {"reap after", c.ReapAfter}} {
		if d.v < 0 {
			return bad("%s %v < 0", d.name, d.v)
		}
	}
	if c.JoinBackoffMin > 0 && c.JoinBackoffMax > 0 && c.JoinBackoffMax < c.JoinBackoffMin {
		return bad("join backoff max %v < min %v", c.JoinBackoffMax, c.JoinBackoffMin)
	}
	m := c.Meta
	if m.State == "" {
		m.State = StateJoining
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: meta: %w", ErrInvalidConfig, err)
	}
	return nil
}

// splitIPPort parses "ip:port" with a literal IP (memberlist binds to IPs, not names).
func splitIPPort(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, p, nil
}

// mlConfig builds the memberlist configuration for c (defaults applied, validated).
func (c Config) mlConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	// A restarted node whose address changed (new container IP, or port 0 in tests) may
	// take its name back once the old incarnation has been dead this long. memberlist's
	// default (0) never allows it until the dead entry is reaped (GossipToTheDeadTime).
	mc.DeadNodeReclaimTime = 10 * time.Second
	if c.Profile == ProfileTest {
		mc.ProbeInterval = 50 * time.Millisecond // failure check each 50 ms (lan: 1 s)
		mc.ProbeTimeout = 30 * time.Millisecond  // direct ack wait before indirect probes (lan: 500 ms)
		mc.GossipInterval = 20 * time.Millisecond
		mc.SuspicionMult = 3           // suspicion >= 3 x probe interval = 150 ms (lan: 4 x 1 s)
		mc.SuspicionMaxTimeoutMult = 6 // at most 900 ms while waiting for confirmations
		mc.PushPullInterval = time.Second
		mc.GossipToTheDeadTime = time.Second
		mc.TCPTimeout = time.Second // join push/pull and TCP fallback pings (lan: 10 s)
		mc.DeadNodeReclaimTime = 100 * time.Millisecond
		mc.QueueCheckInterval = time.Second
	}
	mc.Name = c.Name
	host, port, _ := splitIPPort(c.BindAddr)
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if c.AdvertiseAddr != "" {
		ah, ap, _ := splitIPPort(c.AdvertiseAddr)
		mc.AdvertiseAddr = ah
		if ap != 0 {
			mc.AdvertisePort = ap
		}
	}
	return mc
}
