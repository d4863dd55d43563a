package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/valyala/fasthttp"
)

// ErrorClass names the kind of a fetch failure, for metrics, retries and the
// host's error streak. The values are stable (they are stored and exported).
type ErrorClass string

// Error classes returned by Classify.
const (
	ClassNone           ErrorClass = ""
	ClassTimeout        ErrorClass = "timeout"          // overall or first-byte deadline passed
	ClassConnect        ErrorClass = "connect"          // refused, unreachable, connect timeout
	ClassDNS            ErrorClass = "dns"              // lookup failed (cached negatively)
	ClassReset          ErrorClass = "reset"            // reset or closed by the peer mid-response
	ClassTLS            ErrorClass = "tls"              // handshake or certificate failure
	ClassTooLargeHeader ErrorClass = "too_large_header" // headers exceed MaxHeaderSize
	ClassProtocol       ErrorClass = "protocol"         // malformed HTTP
	ClassCanceled       ErrorClass = "canceled"         // the caller's context was canceled
	ClassBadURL         ErrorClass = "bad_url"          // unparsable or non-http(s) URL
	// ClassForbiddenAddress: the host's address is loopback, private, link-local or another
	// class the address guard refuses (ClassifyAddr), and Config.AllowIPs does not hold it.
	// Nothing was sent; not transient.
	ClassForbiddenAddress ErrorClass = "forbidden_address"
	ClassOther            ErrorClass = "other"
)

// Sentinel errors, one per class; every error returned by Do wraps one of
// them (and the underlying cause) with %w.
var (
	ErrTimeout        = errors.New("fetch: timeout")
	ErrConnect        = errors.New("fetch: connect failed")
	ErrDNS            = errors.New("fetch: dns lookup failed")
	ErrReset          = errors.New("fetch: connection reset")
	ErrTLS            = errors.New("fetch: tls failure")
	ErrHeaderTooLarge = errors.New("fetch: response header too large")
	ErrProtocol       = errors.New("fetch: protocol error")
	ErrCanceled       = errors.New("fetch: canceled")
	ErrBadURL         = errors.New("fetch: bad url")
	// ErrForbiddenAddress wraps an *AddrError.
	ErrForbiddenAddress = errors.New("fetch: forbidden address")

	ErrConfig     = errors.New("fetch: invalid config")
	ErrBadResolve = errors.New("fetch: bad resolve rule")
	ErrBadAllowIP = errors.New("fetch: bad allowed address range")
	ErrClosed     = errors.New("fetch: client closed")
)

var classSentinels = []struct {
	err   error
	class ErrorClass
}{
	{ErrCanceled, ClassCanceled},
	{ErrTimeout, ClassTimeout},
	{ErrDNS, ClassDNS},
	{ErrConnect, ClassConnect},
	{ErrTLS, ClassTLS},
	{ErrHeaderTooLarge, ClassTooLargeHeader},
	{ErrReset, ClassReset},
	{ErrProtocol, ClassProtocol},
	{ErrBadURL, ClassBadURL},
	{ErrForbiddenAddress, ClassForbiddenAddress},
}

var sentinelOf = map[ErrorClass]error{}

func init() {
	for _, s := range classSentinels {
		sentinelOf[s.class] = s.err
	}
}

// Classify returns the class of err: from the sentinel it wraps if any,
// else from the underlying network error. nil gives ClassNone.
func Classify(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	for _, s := range classSentinels {
		if errors.Is(err, s.err) {
			return s.class
		}
	}
	return classifyRaw(err)
}

// IsTransient reports whether retrying later may succeed: timeouts,
// connection failures, resets, temporary DNS failures and TLS handshake
// timeouts. Forbidden addresses, bad URLs, malformed responses, huge headers, certificate
// errors, NXDOMAIN and cancellation are not transient.
func IsTransient(err error) bool {
	switch Classify(err) {
	case ClassTimeout, ClassConnect, ClassReset:
		return true
	case ClassDNS:
		var de *net.DNSError
		if errors.As(err, &de) {
			return !de.IsNotFound
		}
		return true
	}
	return false
}

// classErr wraps cause with the sentinel of class.
func classErr(class ErrorClass, rawURL string, cause error) error {
	s := sentinelOf[class]
	if s == nil {
		return fmt.Errorf("fetch %s: %w", rawURL, cause)
	}
	if cause == nil {
		return fmt.Errorf("fetch %s: %w", rawURL, s)
	}
	return fmt.Errorf("fetch %s: %w: %w", rawURL, s, cause)
}

// wrapErr classifies a raw transport error and wraps it.
func wrapErr(rawURL string, err error) error {
	for _, s := range classSentinels {
		if errors.Is(err, s.err) {
			return fmt.Errorf("fetch %s: %w", rawURL, err)
		}
	}
	return classErr(classifyRaw(err), rawURL, err)
}

func classifyRaw(err error) ErrorClass {
	if errors.Is(err, context.Canceled) {
		return ClassCanceled
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return ClassDNS
	}
	var (
		rhe  tls.RecordHeaderError
		ae   tls.AlertError
		cve  *tls.CertificateVerificationError
		uae  x509.UnknownAuthorityError
		hne  x509.HostnameError
		cie  x509.CertificateInvalidError
		oe   *net.OpError
		nerr net.Error
	)
	if errors.As(err, &rhe) || errors.As(err, &ae) || errors.As(err, &cve) ||
		errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) ||
		errors.Is(err, fasthttp.ErrTLSHandshakeTimeout) {
		return ClassTLS
	}
	if errors.As(err, &oe) && oe.Op == "dial" {
		return ClassConnect
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return ClassConnect
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) {
		return ClassTimeout
	}
	if errors.As(err, &nerr) && nerr.Timeout() {
		return ClassTimeout
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, fasthttp.ErrConnectionClosed) {
		return ClassReset
	}
	return ClassOther
}
