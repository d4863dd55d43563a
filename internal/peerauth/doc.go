// Package peerauth says who is on the other end of a node-to-node connection: the
// cluster's mutual TLS credentials (a CA, and per node a certificate that names the
// node), the check that a peer speaks only for the name its certificate carries, and the
// verified name handed to the handlers that authorize by it.
//
// Duties:
//   - Load a node's credentials (Load: CA file, certificate file, key file, all PEM) and
//     build the TLS configurations for both ends of every node-to-node link: ServerTLS
//     (the certificate, and client certificates required or verified if given, chained to
//     the cluster's CA) and ClientTLS (the certificate presented, the server's chain
//     checked against the CA).
//   - Name nodes in certificates (NodeURI, the URI SAN crawlnode://node/<name>) and read
//     the name back (CertName, PeerName).
//   - On the server side of the internal HTTP routes, Middleware compares the member name
//     the request carries (MemberHeader) with the name of the verified client
//     certificate: a request naming another member is refused with 403 peer_mismatch, one
//     without a verified certificate (when TLS is on) with 403 peer_unverified; the
//     accepted name is put in the request's context.
//   - Create the files of a small cluster's PKI (NewCA, NewNodeCert; the `crawlnode tls`
//     command), like `consul tls ca create` and `consul tls cert create`.
//
// API for handlers that authorize by the peer (internal routes):
//
//	p, ok := peerauth.FromRequest(r) // or FromContext(r.Context())
//	// ok false: the request did not go through Middleware, or carried no member name.
//	// p.Name:     the member the request speaks for (MemberHeader).
//	// p.Verified: true when a client certificate chained to the cluster's CA names
//	//             p.Name (mutual TLS on); false in an insecure cluster (no TLS), where
//	//             the name is only a claim.
//
// A handler that needs an authenticated member (a lease holder's stream, a forwarded
// Raft command) accepts only p.Verified (or, in a cluster that runs without TLS, its
// other credentials); a body that names its sender (a batch's From, a stream header's
// From) is checked with SpeaksFor(r, from). Outgoing requests carry the sender's name
// with SetMember(req, self); the cluster's HTTP client does it for every call.
//
// Decisions where the design is silent:
//   - A node's identity is its name, not its address: addresses change (containers,
//     DHCP) and gossip carries them, names are stable (persisted in the data directory).
//     So a certificate names its node with a URI SAN crawlnode://node/<name> (and the
//     same name as its Common Name); the receiver checks that name, and the client side
//     checks the server's chain against the cluster's CA but not its host name, so
//     certificates need not list every address a node may have (--ip and --dns add SANs
//     for other tools, such as curl against the API).
//   - CertName prefers the crawlnode URI SAN; a certificate without one (an operator's
//     own PKI) names the node by its Common Name. A certificate naming nothing is refused.
//   - Only the cluster's CA is trusted (no system roots): the CA file is the membership.
//   - Keys are ECDSA P-256; the CA is valid 5 years, node certificates 1 year by default;
//     key files are written with mode 0600 and never overwritten.
package peerauth
