package control

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/crawlnode/crawlnode/internal/peerauth"
)

// Raft over mutual TLS. The stream layer wraps tcpStream: outgoing connections present
// this node's certificate and check the server's chain against the cluster's CA;
// incoming ones require a client certificate from the CA, and every RPC read from them
// must carry, as its sender's server ID (RPCHeader.ID), the node name that certificate
// carries. A member cannot vote, lead or install a snapshot under another member's name.
//
// NetworkTransport decodes RPCs itself and tells the consumer nothing about the
// connection, so the check sits under it: checkedConn reads one RPC frame ahead (the type
// byte and the msgpack-encoded request, whose bytes it keeps), checks the header, and only
// then hands the same bytes to the transport. A snapshot's data that follows an
// InstallSnapshot request passes through unread. A frame that names another server, or
// none, closes the connection before Raft sees it.

// raftHandshakeTimeout bounds the TLS handshake of one Raft connection.
const raftHandshakeTimeout = 10 * time.Second

// rpcInstallSnapshot is NetworkTransport's frame type of InstallSnapshot (net_transport.go:
// AppendEntries 0, RequestVote 1, InstallSnapshot 2, TimeoutNow 3, RequestPreVote 4).
const rpcInstallSnapshot = 2

type tlsStream struct {
	*tcpStream
	creds *peerauth.Creds
	log   *slog.Logger
}

var _ raft.StreamLayer = (*tlsStream)(nil)

func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.tcpStream.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, s.creds.ServerTLS(true))
	cc := &checkedConn{Conn: tc, tc: tc, log: s.log}
	cc.br = bufio.NewReaderSize(tc, 64<<10)
	cc.dec = codec.NewDecoder(cc.br, &codec.MsgpackHandle{})
	return cc, nil
}

func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, raftHandshakeTimeout))
	defer cancel()
	return (&tls.Dialer{NetDialer: d, Config: s.creds.ClientTLS()}).DialContext(ctx, "tcp", string(address))
}

// checkedConn is an accepted Raft connection whose RPCs are checked against the peer's
// certificate before the transport reads them.
type checkedConn struct {
	net.Conn
	tc   *tls.Conn
	log  *slog.Logger
	br   *bufio.Reader
	dec  *codec.Decoder
	peer string // the certificate's node name, after the handshake

	pending     []byte // the checked frame, not yet read by the transport
	passthrough int64  // snapshot bytes that follow the checked frame
	err         error
}

// rpcHeader is the part of every Raft request the check reads (RPCHeader is embedded,
// so its fields are at the top level of the encoded map), plus InstallSnapshot's Size.
type rpcHeader struct {
	raft.RPCHeader
	Size int64
}

func (c *checkedConn) Read(p []byte) (int, error) {
	for len(c.pending) == 0 && c.passthrough == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.err = c.next()
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if int64(len(p)) > c.passthrough {
		p = p[:c.passthrough]
	}
	n, err := c.br.Read(p)
	c.passthrough -= int64(n)
	return n, err
}

// next reads and checks one frame.
func (c *checkedConn) next() error {
	if c.peer == "" {
		ctx, cancel := context.WithTimeout(context.Background(), raftHandshakeTimeout)
		err := c.tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.log.Warn("raft: refused a connection: TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			return err
		}
		st := c.tc.ConnectionState()
		name, err := peerauth.PeerName(&st)
		if err != nil {
			c.log.Warn("raft: refused a connection: its certificate names no node", "remote", c.RemoteAddr().String(), "err", err)
			return err
		}
		c.peer = name
	}
	typ, err := c.br.ReadByte()
	if err != nil {
		return err
	}
	var raw codec.Raw
	if err := c.dec.Decode(&raw); err != nil {
		return err
	}
	var h rpcHeader
	if err := codec.NewDecoderBytes(raw, &codec.MsgpackHandle{}).Decode(&h); err != nil {
		return fmt.Errorf("raft: undecodable request header: %w", err)
	}
	if string(h.ID) != c.peer {
		c.log.Warn("raft: refused a request speaking for another server", "peer", c.peer, "claimed", string(h.ID), "remote", c.RemoteAddr().String())
		return fmt.Errorf("%w: raft request from %q speaks for server %q", peerauth.ErrMismatch, c.peer, h.ID)
	}
	c.pending = append(append(make([]byte, 0, len(raw)+1), typ), raw...)
	if typ == rpcInstallSnapshot {
		if h.Size < 0 {
			return fmt.Errorf("raft: snapshot size %d", h.Size)
		}
		c.passthrough = h.Size
	}
	return nil
}
