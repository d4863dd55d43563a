// Package cluster is one node's membership in a crawl cluster: gossip, the ring, the
// Raft-held lease table, fencing, the leader's upkeep, partition handoff, the leftover
// sweep, decommission and cluster-wide completion.
//
//	memberlist (gossip/) ──alive members, their state──▶ ring (ring/) ──▶ who should own p
//	Raft (control/) ── lease table p -> (owner, epoch), job config, member registry
//	     │
//	     ├─ fence: a partition is fetched only while Owns(p) (lease + recent leader
//	     │  contact) and no handoff holds it; otherwise it is paused in the frontier
//	     ├─ route: a discovered link goes to frontier.Add when this node holds its
//	     │  partition's lease, else to the durable outbox (forward/), which ships it to
//	     │  the lease holder
//	     ├─ handoff: a partition whose ring owner is another live node is paused, drained,
//	     │  streamed (snapshot/) to it, its lease moved (AssignLeases, epoch+1), the rest
//	     │  streamed again, then dropped here
//	     └─ leader: registers members (Reconcile), assigns unowned partitions, forces the
//	        leases of a member dead longer than the grace period onto the ring's owners
//
// What to remove, assign, force and hand off is decided by the pure functions of plan.go,
// tested from tables without a network or a clock; the methods of Cluster gather their
// input and apply their answers.
//
// Handoff of partition p from A (lease holder at epoch e) to B (its ring owner):
//
//	A: hold p (no fetching, p's links to the outbox), wait for p's fetches in flight
//	A ──snapshot stream (p, e, A->B)──▶ B: accepts because the lease says (A, e); imports
//	A: AssignLeases p: A@e -> B (epoch e+1), through the leader; waits to see it applied
//	A ──snapshot stream (p, e+1)──▶ B: what reached A between the two streams (idempotent merge)
//	A: drop p; release the hold (p stays fenced: A no longer holds its lease)
//
// B fetches p only once its own copy of the lease table names it, after the commit, and A
// stopped before the first stream: no host is fetched by both. A failure before the
// commit releases p on A (B's copy is a harmless duplicate that B's sweep sends back);
// after the commit, whatever A still holds of p is sent by the sweep, which streams every
// partition present here but leased elsewhere to its holder and then drops it.
//
// Decisions where the design is silent:
//   - The ring's members are the Raft registry's members minus those that announce
//     draining or left: a node that stops (restart, crash) stays in the ring and keeps its
//     leases until the leader has seen it dead for Grace; then it is removed and its
//     partitions are forced to the ring's next owners (without replicas its queued work is
//     lost with it; replication is a separate feature).
//   - A node that runs alone (no --join, no --bootstrap-expect) is a cluster of one on
//     ephemeral gossip and Raft ports: the same code path, leases and all.
//   - Known peers' gossip addresses are kept in DIR/peers.json, so a restarted node
//     rejoins without --join.
//   - The job's pause flag and blocked domains live in the Raft job configuration; every
//     node copies them into its local operator state as they change.
//   - Done (for --exit-when-done) is decided by each node: every registered member alive
//     and idle (empty frontier, nothing in flight, empty outbox, no handoff, nothing held
//     for another owner) in two consecutive rounds a second apart, with every partition
//     leased and at least one member seeded (given seeds, or holding seen URLs): a
//     cluster started without seeds waits for them rather than calling an empty crawl
//     done. A node that decided keeps answering "done" for a few seconds before it
//     exits, and a node that hears "done" from a peer is done too. Once done and its own
//     extract stage has caught up, a node still waits (WaitExtracted) until no alive
//     member has an extract backlog: those members' duplicate decisions may need the keys
//     this node owns (package dedup), and they would wait for ever for an owner gone.
//   - Internal node-to-node calls are HTTP under /internal/ on the API address, or on the
//     node's internal listener when it has one, sent by the cluster's client (newClient):
//     marked with the sender's member name (peerauth.MemberHeader) and signed as this
//     node (Deps.Signer, clusterauth) over Deps.Transport or the TLS transport; never the
//     operator's token. With TLS they are HTTPS with mutual TLS on the internal listener
//     (which the node always opens then), and the caller is its client certificate's
//     name; without, the signature under the cluster key names it. The routes trust the
//     caller's name the node authenticated (clusterauth.PeerFrom, the one caller-name
//     function) and check it against the table (authz.go): a links batch, a partition
//     stream and a replica stream must come from the sender they name; a forwarded Raft
//     command only as its sender may send it (its own page budget, leases it holds, the
//     leader's own decisions from voters only); job changes from any member, as the state
//     machine validates every configuration as a whole. docs/architecture.md,
//     "Cross-node messages", lists every one.
//   - Members only (security.go, keyring.go): the cluster key seeds the gossip keyring,
//     kept in DIR/keyring.json (0600), which wins over the configured key once it exists
//     (a rotation changed it). The same keyring keys the internal calls' signatures
//     (authKeys, at start and after every step): the primary signs, every key in the ring
//     verifies, so a rotation never cuts the internal calls. A rotation step (install,
//     use, remove) runs on every alive member by an internal call that only an
//     authenticated member over mutual TLS (or, without TLS, over loopback) may make, so
//     the key never travels in the clear. A node refuses to serve gossip, Raft or the
//     internal endpoints beyond loopback without both the key and TLS unless
//     InsecureCluster (CheckExposure, one line naming what is exposed and what is
//     missing).
//   - The cluster talks to the node's frontier through the Frontier interface and to the
//     node through Host (job settings, its fetch counters): no back-pointer to the node,
//     so a test can run the cluster's decisions over a fake frontier.
package cluster
