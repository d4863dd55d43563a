package archive

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors. Every error returned by this package wraps one of them (test with errors.Is).
var (
	ErrConfig    = errors.New("archive: invalid config")
	ErrInvalid   = errors.New("archive: invalid exchange")
	ErrClosed    = errors.New("archive: writer closed")
	ErrIO        = errors.New("archive: i/o error")
	ErrDiskFull  = errors.New("archive: disk full")
	ErrCorrupt   = errors.New("archive: corrupt warc data")
	ErrTruncated = errors.New("archive: truncated warc data")
	ErrDigest    = errors.New("archive: digest mismatch")
	ErrNotFound  = errors.New("archive: record not found")
)

// ioErr wraps an I/O error with ErrDiskFull when it is ENOSPC (or EDQUOT), else with ErrIO,
// keeping the original error in the chain.
func ioErr(op, file string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s %s: %w", ErrDiskFull, op, file, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrIO, op, file, err)
}
