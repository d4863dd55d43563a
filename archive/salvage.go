package archive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
)

// Damage is a region of a WARC file that could not be read.
type Damage struct {
	File   string // path of the file
	Offset int64  // where the unreadable bytes start (end of the last good record)
	Resume int64  // where the next good record starts; -1 when none follows
	Err    error
}

func (d Damage) Error() string {
	if d.Resume < 0 {
		return fmt.Sprintf("%s: damaged from offset %d to the end: %v", d.File, d.Offset, d.Err)
	}
	return fmt.Sprintf("%s: damaged from offset %d, records resume at offset %d: %v", d.File, d.Offset, d.Resume, d.Err)
}

// Unwrap returns the cause, so errors.Is(d, ErrCorrupt) and friends work on a Damage.
func (d Damage) Unwrap() error { return d.Err }

// isDamage tells a damaged file from an error returned by the caller's fn.
func isDamage(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) || errors.Is(err, ErrDigest)
}

// gzipMagic starts every gzip member (ID1 ID2 CM=deflate).
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// ScanSalvage is Scan for files that may be damaged anywhere (a bad sector, not only a torn
// tail): fn gets every record that parses and verifies, with its member's offset and
// length; each unreadable region is reported to onDamage, and reading resumes at the next
// gzip member that holds a valid record. It returns only I/O errors and fn's errors.
func ScanSalvage(path string, fn func(off, length int64, r *Record) error, onDamage func(Damage)) error {
	f, err := os.Open(path)
	if err != nil {
		return ioErr("open", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ioErr("stat", path, err)
	}
	size := st.Size()
	// One probe reader, gzip reader and search window for every candidate: a damaged region
	// dense with gzip magic bytes has a candidate every 3 bytes.
	probe := bufio.NewReaderSize(nil, 4<<10)
	var probeZ *gzip.Reader
	magic := magicFinder{f: f, size: size, buf: make([]byte, 64<<10)}
	var from int64
	for from < size {
		goodEnd, err := scanMembers(io.NewSectionReader(f, from, size-from), path, from, fn)
		if err == nil {
			return nil
		}
		if !isDamage(err) {
			return err
		}
		// Find the next member after the damage whose record reads cleanly.
		resume := int64(-1)
		for cand := goodEnd + 1; ; cand++ {
			next, ferr := magic.next(cand)
			if ferr != nil {
				return ioErr("read", path, ferr)
			}
			if next < 0 {
				break
			}
			if _, perr := scanMembersWith(probe, &probeZ, io.NewSectionReader(f, next, size-next), path, next, func(int64, int64, *Record) error {
				return errProbeOK
			}); errors.Is(perr, errProbeOK) {
				resume = next
				break
			}
			cand = next
		}
		if onDamage != nil {
			onDamage(Damage{File: path, Offset: goodEnd, Resume: resume, Err: err})
		}
		if resume < 0 {
			return nil
		}
		from = resume
	}
	return nil
}

// errProbeOK ends a probe scan after its first good record.
var errProbeOK = errors.New("archive: probe found a good record")

// magicFinder finds gzip member headers in a file through one window, read again only when
// a search leaves it, so that finding every candidate of a region reads it about once.
type magicFinder struct {
	f     *os.File
	size  int64
	buf   []byte
	start int64 // file offset of buf[0]
	n     int   // valid bytes in buf
}

// next returns the offset of the first gzip member header at or after from, or -1.
func (m *magicFinder) next(from int64) (int64, error) {
	for from < m.size {
		if from < m.start || from+int64(len(gzipMagic)) > m.start+int64(m.n) {
			n, err := m.f.ReadAt(m.buf, from)
			if n == 0 && err != nil && err != io.EOF {
				return -1, err
			}
			m.start, m.n = from, n
			if n < len(gzipMagic) {
				return -1, nil
			}
		}
		if i := bytes.Index(m.buf[from-m.start:m.n], gzipMagic); i >= 0 {
			return from + int64(i), nil
		}
		end := m.start + int64(m.n)
		if end >= m.size {
			return -1, nil
		}
		from = end - int64(len(gzipMagic)) + 1
	}
	return -1, nil
}
