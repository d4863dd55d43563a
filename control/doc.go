// Package control is the cluster's small Raft group: its replicated state machine and
// the node-side wrapper that runs hashicorp/raft over raft-wal.
//
// Duties:
//   - State and FSM: the job configuration (user agent, limits, scope, patterns, default
//     delay, blocked domains, paused), the lease table (partition -> owner, epoch) and the
//     member registry (name -> Raft and HTTP addresses, voter). State.Apply is a pure,
//     deterministic function of (state, command, index), table-tested without Raft.
//   - Commands: SetConfig (compare-and-set on the config version), BlockDomain,
//     UnblockDomain, Pause, Resume, RegisterMember, RemoveMember, AssignLeases (handoffs,
//     compare-and-set on owner and epoch), ForceLease (takeover from a dead owner),
//     GrantPages and ReturnPages (the cluster's page limit, JobConfig.MaxPages).
//     Refusals are Result.Err values wrapping sentinels, never panics.
//   - Control: New/Start/Shutdown around Raft; Bootstrap (--bootstrap-expect), AddMember,
//     RemoveMember and Reconcile (voter upkeep) on the leader; Apply (leader only: others
//     get a *NotLeaderError with the leader's HTTP address to forward to); State, Owns,
//     InContact, Leader, IsLeader.
//
// Data flow:
//
//	caller ──Apply(cmd)──▶ leader Control ──raft.Apply──▶ log (raft-wal) ──▶ FSM on every node
//	node/  ◀──Owns(p)───── local FSM lease table + InContact (heard from the leader lately)
//
// Decisions where the design is silent:
//   - Every SetConfig is validated as a whole by the state machine itself
//     (JobConfig.Validate, validate.go: the bounds on delay, per-host requests, depth,
//     page limits, user agent, patterns, blocked domains, recrawl interval), whoever
//     proposed it, so a forged or buggy command cannot make the crawl impolite or
//     unbounded; the API checks the same before proposing. A command refused is a
//     Result.Err (ErrInvalidCommand), the same on every replica. Bounds are part of the
//     log's meaning: raising one is compatible, lowering one refuses, on replay, entries
//     an older build accepted (every replica alike, so they still agree).
//   - Wire format: one command-type byte, then JSON. An incompatible change gets a new
//     type byte; an old byte never changes meaning. Unknown bytes are refused
//     (ErrInvalidCommand), so a new command must only be proposed once every node runs a
//     binary that knows it. Snapshots: one format byte, then the JSON State.
//   - Times (JoinedAt, UpdatedAt, Lease.Since) come inside commands from the proposer's
//     clock and are stored in UTC; Apply reads no clock.
//   - Every change to JobConfig (SetConfig, block, unblock, pause, resume) bumps
//     Config.Version, so a SetConfig built from an older read cannot undo a block or a
//     pause. No-ops (blocking a blocked domain) do not bump it.
//   - Blocked domains are stored trimmed, lower-case, without outer dots, as IDNA
//     A-labels, sorted and unique; a block covers subdomains (JobConfig.Blocked).
//   - Lease batches are all-or-none. AssignLeases checks owner and epoch of every move
//     (initial assignment moves from ("", 0)); ForceLease checks the owner only, since
//     the dead owner cannot report its epoch, and still refuses a force decided on an old
//     table. Either way the new epoch is the old plus one. Targets must be registered
//     members. RemoveMember leaves the member's leases alone: moving them is explicit.
//   - The page limit is granted, not counted: State.Budget holds each member's grant and
//     its last reported spending. GrantPages gives min(ask, remainder, ceil(remainder /
//     (2 * members))) (GrantSize, pure), so grants shrink as the limit nears and the sum of
//     grants never passes it; spending is reported as an absolute count and only rises (a
//     repeated or reordered report is harmless) and never passes the grant; ReturnPages
//     sets the grant to the spending. Counting every fetch through Raft would cost a
//     commit a page; a grant costs one per chunk. ForceLease also reclaims the unspent
//     grant of the owner it takes from, else a dead member's grant would keep the limit
//     out of reach for ever. The limit is reached when the reported spending adds up to it
//     (State.PageLimitReached).
//   - Voters: Config.Voters (3), or LargeVoters (5) from LargeClusterSize (7) members on,
//     capped by the member count and rounded down to odd. Reconcile promotes alive
//     non-voters first (lowest names first), then demotes dead voters to non-voters
//     rather than removing them, so a restarted node rejoins without a new join;
//     RemoveMember is for decommission or death past the grace period. Surplus alive
//     voters are not demoted (no churn when the target drops).
//   - Bootstrap: the lowest name among the peers bootstraps, with the first
//     VoterTarget(n) names as voters and the rest as non-voters; a data dir with Raft
//     state never bootstraps again. BootstrapExpect 1 bootstraps at Start; 0 never does.
//     The registry fills in when the leader runs Reconcile with gossip's members (the
//     Consul pattern: the caller runs it on the leader on every membership event and
//     periodically); the leader registers itself.
//   - Self-fencing: see Control.InContact. The ForceLease grace period must be well above
//     LeaseTimeout, so a cut-off owner has fenced itself before its leases move.
//     Known gap: Raft heartbeats carry no commit index, so a follower that reconnects
//     counts as in contact at its first heartbeat, maybe before the entries it missed
//     are replicated; for that short catch-up it may still see a lease that was forced
//     away. Epochs keep its transfers out (receivers refuse old epochs); politeness is
//     at risk only for that window.
//   - Mutual TLS (Config.TLS): the stream layer dials and accepts TLS with the node's
//     certificate; an accepted connection needs a client certificate of the cluster's CA,
//     and each RPC read from it must carry, as its sender's server ID, the node name the
//     certificate carries (tlsstream.go checks one frame ahead of NetworkTransport, which
//     tells nothing about connections). A member cannot vote, lead or install a snapshot
//     under another member's name; a refused frame closes the connection. The dialer
//     checks the server's chain, not its name: the receiver's check is what binds names.
//   - Transport: raft's NetworkTransport over our own TCP stream layer, which also closes
//     accepted connections on Close (raft's TCPStreamLayer leaves the inbound handlers of
//     a shut-down node running until each peer drops its connection). Shutdown also
//     closes pooled outbound streams.
//   - raft-wal's Close does not close its BoltDB meta store; Control owns and closes it,
//     so a node can be restarted from its data dir within one process.
//   - Shutdown does not transfer leadership: a shutdown and a crash look the same.
package control
