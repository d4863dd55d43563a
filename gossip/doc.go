// Package gossip is Crawlnode's cluster membership: a thin, testable layer over
// hashicorp/memberlist.
//
// Duties:
//   - run one memberlist instance per node (New binds, Start runs the event loop,
//     Shutdown stops both), with a LAN preset and a fast preset for tests (Config.Profile);
//   - carry each node's metadata (HTTP and Raft addresses, state, version, data format,
//     start time) in a compact binary encoding checked against memberlist's 512-byte limit;
//   - join a cluster with retries and backoff, leave gracefully, update metadata;
//   - keep a member table (Members, Alive, Local) and stream membership changes as
//     coalesced batches of join, leave, fail and update events (Events).
//
// Data flow:
//
//	memberlist callbacks --copy+seq--> table (Members) + buffered chan --> event loop
//	      (never block)                     \-- overflow slot per member --/    |
//	                                                          coalescer (latest per member)
//	                                                                            |
//	                                                        Events() <- one batch at a time
//
// Decisions where the design is silent:
//   - Metadata is a versioned binary record (format byte 1, length-prefixed strings,
//     varints), about 60 bytes for typical values, so there is room to grow under 512.
//     Readers ignore trailing bytes, so fields can be appended without a format bump.
//     SetMeta and New refuse anything larger (ErrMetaTooLarge) before memberlist, which
//     would panic, sees it.
//   - Callbacks never block: they copy the node, decode its metadata, update the table under
//     a short mutex and try a non-blocking send; when the channel is full the event goes to
//     a per-member overflow slot. Every event carries a sequence number, so the loop can
//     tell an older channel event from a newer overflow one. Nothing is ever dropped: the
//     latest state of each member always reaches the consumer.
//   - Coalescing: the loop waits CoalesceWindow after the first change of a burst, then
//     offers one batch; while the consumer does not take it, new changes merge into it
//     (latest per member). The kind is the net change against what the consumer last
//     received (see EventKind): a restart inside one batch is an Update with the new Meta
//     (new Started), a join followed by a failure of a member never delivered is nothing.
//   - Members() is fed by the callbacks, not by memberlist.Members(), whose result points
//     into memberlist's live table and races with its updates. For the same reason there is
//     no "suspect" status: memberlist exposes it neither safely nor through a callback.
//     Dead and left members stay listed for Config.ReapAfter.
//   - Events include the local node (its Join at New, Update on SetMeta, Leave on Leave).
//   - A restarted node with the same name but a new address takes its name back once its
//     old incarnation is dead for DeadNodeReclaimTime (10 s lan, 100 ms test). With the same
//     address it refutes its old death at once (memberlist's incarnation refutation).
//   - Join counts success as "at least one address answered" and retries the whole list
//     with doubling backoff until JoinTimeout, Shutdown, or the caller's context.
//   - With Config.Keys every message is encrypted and authenticated (memberlist's keyring,
//     GossipVerifyIncoming and GossipVerifyOutgoing): a process without a key of the ring
//     is not heard and hears nothing, so it cannot join. InstallKey, UseKey and RemoveKey
//     change this node's keyring only; the cluster layer runs each step on every member
//     and persists the result.
//   - memberlist's log lines are mapped to slog levels ([DEBUG] -> Debug, ...), tagged
//     source=memberlist.
package gossip
