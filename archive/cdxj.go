package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// IndexSuffix is appended to a WARC file's name to name its CDXJ index.
const IndexSuffix = ".cdxj"

// IndexEntry is one CDXJ line: a record that replay tools look up (response, revisit,
// resource, metadata; pywb's choice), located by the gzip member holding it.
type IndexEntry struct {
	URL      string    // WARC-Target-URI
	Time     time.Time // WARC-Date
	Mime     string    // media type of the HTTP payload ("warc/revisit" for revisits); may be ""
	Status   int       // HTTP status; 0 when there is none
	Digest   string    // WARC-Payload-Digest as written ("sha1:BASE32"); may be ""
	Offset   int64     // of the record's gzip member in the file
	Length   int64     // compressed length of that member
	Filename string    // base name of the WARC file
}

// cdxjFields is the JSON block in pywb's field order; numbers are strings, as pywb writes them.
type cdxjFields struct {
	URL      string `json:"url"`
	Mime     string `json:"mime,omitempty"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   string `json:"length"`
	Offset   string `json:"offset"`
	Filename string `json:"filename"`
}

// cdxjTimestamp formats t as the 14-digit CDX timestamp.
func cdxjTimestamp(t time.Time) string { return t.UTC().Format("20060102150405") }

// Line formats e as a CDXJ line without its newline: "SURT TIMESTAMP {json}".
func (e IndexEntry) Line() string {
	f := cdxjFields{URL: e.URL, Mime: e.Mime, Digest: e.Digest,
		Length: strconv.FormatInt(e.Length, 10), Offset: strconv.FormatInt(e.Offset, 10), Filename: e.Filename}
	if e.Status != 0 {
		f.Status = strconv.Itoa(e.Status)
	}
	return SURT(e.URL) + " " + cdxjTimestamp(e.Time) + " " + marshalCompact(f)
}

// marshalCompact encodes v as one line of JSON without HTML escaping.
func marshalCompact(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and ints only: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// ParseIndexLine splits a CDXJ line into its key, timestamp and entry. Pure.
func ParseIndexLine(line string) (key, ts string, e IndexEntry, err error) {
	key, rest, ok1 := strings.Cut(line, " ")
	ts, js, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || len(ts) != 14 {
		return "", "", e, fmt.Errorf("%w: cdxj line %.80q: want \"SURT TIMESTAMP {json}\"", ErrCorrupt, line)
	}
	var f cdxjFields
	if err := json.Unmarshal([]byte(js), &f); err != nil {
		return "", "", e, fmt.Errorf("%w: cdxj line %.80q: %w", ErrCorrupt, line, err)
	}
	e = IndexEntry{URL: f.URL, Mime: f.Mime, Digest: f.Digest, Filename: f.Filename}
	e.Time, err = time.Parse("20060102150405", ts)
	if err == nil && f.Status != "" {
		e.Status, err = strconv.Atoi(f.Status)
	}
	if err == nil {
		e.Length, err = strconv.ParseInt(f.Length, 10, 64)
	}
	if err == nil {
		e.Offset, err = strconv.ParseInt(f.Offset, 10, 64)
	}
	if err != nil {
		return "", "", e, fmt.Errorf("%w: cdxj line %.80q: %w", ErrCorrupt, line, err)
	}
	return key, ts, e, nil
}

// indexedType reports whether records of type t get a CDXJ line.
func indexedType(t string) bool {
	return t == rtResponse || t == rtRevisit || t == "resource" || t == "metadata"
}

// entryOf builds the index entry of a record read back; ok is false for types not indexed.
func entryOf(r *Record, file string, off, length int64) (IndexEntry, bool) {
	if !indexedType(r.Type) {
		return IndexEntry{}, false
	}
	e := IndexEntry{URL: r.TargetURI, Time: r.Date, Status: r.HTTPStatus,
		Digest: r.Headers["WARC-Payload-Digest"], Offset: off, Length: length, Filename: file}
	switch {
	case r.Type == rtRevisit:
		e.Mime = "warc/revisit"
	case r.HTTPHeader != nil:
		e.Mime = mediaType(r.HTTPHeader.Get("Content-Type"))
	default:
		e.Mime = mediaType(r.Headers["Content-Type"])
	}
	if e.Digest == "" && r.Type != rtResponse && r.Type != rtRevisit {
		e.Digest = r.Headers["WARC-Block-Digest"]
	}
	return e, true
}

// mediaType returns the lower-cased type/subtype of a Content-Type value, "" if none.
func mediaType(ct string) string {
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// httpStatusAndType reads the status code and media type from a raw HTTP response header
// without building a map (the writer's hot path).
func httpStatusAndType(hdr []byte) (int, string) {
	line, rest, _ := bytes.Cut(hdr, []byte("\n"))
	status := 0
	if f := bytes.Fields(line); len(f) >= 2 {
		status, _ = strconv.Atoi(string(f[1]))
	}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, val, ok := bytes.Cut(line, []byte(":"))
		if ok && len(name) == len("content-type") && bytes.EqualFold(name, []byte("content-type")) {
			return status, mediaType(string(bytes.TrimSpace(val)))
		}
	}
	return status, ""
}

// linePrefix is a CDXJ line up to its offset field: the writer builds it outside its lock
// and completes it (lineAt) once the record's offset in the file is known.
func linePrefix(e IndexEntry) string {
	f := cdxjFields{URL: e.URL, Mime: e.Mime, Digest: e.Digest, Length: strconv.FormatInt(e.Length, 10)}
	if e.Status != 0 {
		f.Status = strconv.Itoa(e.Status)
	}
	js := marshalCompact(f)
	// Cut the JSON before its offset field: `..."length":"N","offset":"","filename":""}`.
	js = js[:strings.LastIndex(js, `,"offset":`)]
	return SURT(e.URL) + " " + cdxjTimestamp(e.Time) + " " + js
}

// lineAt completes a linePrefix with the member offset and the file name (file names are
// ours: no characters JSON would escape).
func lineAt(prefix string, off int64, file string) string {
	return prefix + `,"offset":"` + strconv.FormatInt(off, 10) + `","filename":"` + file + `"}`
}

// writeIndexFile sorts lines (by their bytes, as pywb and `LC_ALL=C sort` do) and writes
// them to path via a temporary file, fsynced and renamed into place.
func writeIndexFile(path string, lines []string) error {
	slices.Sort(lines)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return ioErr("create", tmp, err)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	for _, l := range lines {
		bw.WriteString(l)
		bw.WriteByte('\n')
	}
	err = bw.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return ioErr("write index", path, err)
	}
	return nil
}

// IndexLines reads the WARC file at path and returns its CDXJ lines, sorted. A damaged file
// gives a Damage error naming the file and the offset of the first unreadable member (it
// wraps ErrCorrupt or ErrTruncated), with the lines of the records before it.
func IndexLines(path string) ([]string, error) {
	name := filepath.Base(path)
	var lines []string
	goodEnd, err := scanFile(path, func(off, n int64, r *Record) error {
		if e, ok := entryOf(r, name, off, n); ok {
			lines = append(lines, e.Line())
		}
		return nil
	})
	slices.Sort(lines)
	if err != nil {
		if isDamage(err) {
			return lines, Damage{File: path, Offset: goodEnd, Resume: -1, Err: err}
		}
		return nil, err
	}
	return lines, nil
}

// RebuildIndex (re)writes the CDXJ index beside the WARC file at path (path + IndexSuffix)
// from the file's records. Errors as IndexLines; on error no index is written (a partial one
// would hide the damage).
func RebuildIndex(path string) error {
	lines, err := IndexLines(path)
	if err != nil {
		return err
	}
	return writeIndexFile(path+IndexSuffix, lines)
}

// WriteIndex writes the sorted CDXJ lines of the WARC file at path to w: from its index
// file when there is one, else read from the WARC file. On damage it writes the lines of the
// records before it and returns the Damage (see IndexLines).
func WriteIndex(path string, w io.Writer) error {
	f, err := os.Open(path + IndexSuffix)
	if err == nil {
		defer func() { _ = f.Close() }()
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("copy index of %s: %w", path, err)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return ioErr("open", path+IndexSuffix, err)
	}
	lines, err := IndexLines(path)
	if err != nil && !isDamage(err) {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, l := range lines {
		bw.WriteString(l)
		bw.WriteByte('\n')
	}
	if ferr := bw.Flush(); ferr != nil {
		return ferr
	}
	return err
}
