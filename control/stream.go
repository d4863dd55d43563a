package control

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStream is raft's TCP stream layer plus one thing raft's lacks: Close also closes
// the connections it accepted. raft's NetworkTransport.Close only closes the listener, so
// a shut-down node's inbound handlers would keep reading until each peer dropped its
// pooled connection; with this they end at Shutdown.
type tcpStream struct {
	ln        net.Listener
	advertise net.Addr

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*tcpStream)(nil)

func newTCPStream(bind string, advertise net.Addr) (*tcpStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("local bind address is not advertisable")
	}
	return &tcpStream{ln: ln, advertise: advertise, conns: map[net.Conn]struct{}{}}, nil
}

func (s *tcpStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	s.conns[c] = struct{}{}
	return &trackedConn{Conn: c, s: s}, nil
}

func (s *tcpStream) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[net.Conn]struct{}{}
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		c.Close()
	}
	return err
}

func (s *tcpStream) Addr() net.Addr { return s.advertise }

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", string(address))
}

type trackedConn struct {
	net.Conn
	s *tcpStream
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c.Conn)
	c.s.mu.Unlock()
	return c.Conn.Close()
}
