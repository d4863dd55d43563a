package archive

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"
)

// WACZVersion is the version of the WACZ specification the packages follow.
const WACZVersion = "1.1.1"

// WACZOptions say what goes into a WACZ package.
type WACZOptions struct {
	WARCs    []string  // paths of the WARC files, packaged as they are
	Title    string    // the package's title (datapackage.json and the pages list)
	Software string    // "crawlnode VERSION"
	Created  time.Time // zero: now
	// PageTitle returns the title of a page's HTML, "" when unknown. Optional.
	PageTitle func(url string) string
	// OnDamage is told of each damaged WARC file without an index: the records from the
	// damage on are not in the package's index (see MergeIndexes).
	OnDamage func(path string, err error)
}

// WACZStats counts what went into a package.
type WACZStats struct {
	WARCs, IndexLines, Pages int64
}

// waczResource is one entry of datapackage.json's resources.
type waczResource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// WriteWACZ writes a WACZ 1.1 package to w: archive/*.warc.gz (stored, not re-compressed),
// indexes/index.cdxj (the merged, sorted index of those files), pages/pages.jsonl (one line
// per URL captured as text/html with status 200, its first capture's time and its title when
// PageTitle knows it), datapackage.json (every file's sha256 and size) and
// datapackage-digest.json (the sha256 of datapackage.json). The index and the page list go
// through temporary files, so memory does not grow with the crawl. A damaged WARC file is
// packaged as it is; its index lines stop at the damage (OnDamage).
func WriteWACZ(w io.Writer, o WACZOptions) (WACZStats, error) {
	var st WACZStats
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	idx, err := os.CreateTemp("", "crawlnode-wacz-*.cdxj")
	if err != nil {
		return st, ioErr("create", "temporary index", err)
	}
	defer func() { _ = idx.Close(); _ = os.Remove(idx.Name()) }()
	bw := bufio.NewWriter(idx)
	st.IndexLines, err = MergeIndexes(bw, o.WARCs, o.OnDamage)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return st, err
	}
	pages, err := os.CreateTemp("", "crawlnode-wacz-*.jsonl")
	if err != nil {
		return st, ioErr("create", "temporary page list", err)
	}
	defer func() { _ = pages.Close(); _ = os.Remove(pages.Name()) }()
	if st.Pages, err = writePages(idx, pages, o); err != nil {
		return st, err
	}

	zw := zip.NewWriter(w)
	var res []waczResource
	for _, p := range o.WARCs {
		r, err := zipFile(zw, "archive/"+filepath.Base(p), p, zip.Store)
		if err != nil {
			return st, err
		}
		res = append(res, r)
		st.WARCs++
	}
	for _, f := range []struct{ path, file string }{{"indexes/index.cdxj", idx.Name()}, {"pages/pages.jsonl", pages.Name()}} {
		r, err := zipFile(zw, f.path, f.file, zip.Deflate)
		if err != nil {
			return st, err
		}
		res = append(res, r)
	}
	dp, err := json.MarshalIndent(map[string]any{
		"profile": "data-package", "wacz_version": WACZVersion, "title": o.Title,
		"created": o.Created.UTC().Format(time.RFC3339), "software": o.Software, "resources": res,
	}, "", "  ")
	if err != nil {
		return st, err
	}
	if err := zipBytes(zw, "datapackage.json", dp); err != nil {
		return st, err
	}
	sum := sha256.Sum256(dp)
	dg, _ := json.MarshalIndent(map[string]string{"path": "datapackage.json", "hash": "sha256:" + hex.EncodeToString(sum[:])}, "", "  ")
	if err := zipBytes(zw, "datapackage-digest.json", dg); err != nil {
		return st, err
	}
	return st, zw.Close()
}

// writePages reads the sorted index in idx and writes the page list to out. Captures of one
// URL are adjacent or share a SURT key, so a set per key finds the first capture of each.
func writePages(idx, out *os.File, o WACZOptions) (int64, error) {
	if _, err := idx.Seek(0, io.SeekStart); err != nil {
		return 0, ioErr("seek", idx.Name(), err)
	}
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	title := o.Title
	if title == "" {
		title = "All Pages"
	}
	if err := enc.Encode(map[string]string{"format": "json-pages-1.0", "id": "pages", "title": title}); err != nil {
		return 0, err
	}
	type page struct {
		URL   string `json:"url"`
		TS    string `json:"ts"`
		Title string `json:"title,omitempty"`
	}
	var n int64
	curKey := ""
	seen := map[string]bool{}
	sc := bufio.NewScanner(idx)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		key, _, e, err := ParseIndexLine(sc.Text())
		if err != nil {
			return n, err
		}
		if key != curKey {
			curKey = key
			clear(seen)
		}
		if e.Mime != "text/html" || e.Status != 200 || seen[e.URL] {
			continue
		}
		seen[e.URL] = true
		p := page{URL: e.URL, TS: e.Time.UTC().Format(time.RFC3339)}
		if o.PageTitle != nil {
			p.Title = o.PageTitle(e.URL)
		}
		if err := enc.Encode(p); err != nil {
			return n, err
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("read merged index: %w", err)
	}
	return n, bw.Flush()
}

// hashCounter hashes and counts what is written through it.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (c *hashCounter) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

// zipFile copies the file at src into the package as name and returns its resource entry.
func zipFile(zw *zip.Writer, name, src string, method uint16) (waczResource, error) {
	f, err := os.Open(src)
	if err != nil {
		return waczResource{}, ioErr("open", src, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return waczResource{}, ioErr("stat", src, err)
	}
	hdr := &zip.FileHeader{Name: name, Method: method, Modified: fi.ModTime()}
	zf, err := zw.CreateHeader(hdr)
	if err != nil {
		return waczResource{}, err
	}
	hc := &hashCounter{h: sha256.New()}
	// A WARC file still being written may grow: the package takes the bytes there were
	// when the copy began, which cover every indexed record.
	if _, err := io.Copy(io.MultiWriter(zf, hc), io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return waczResource{}, fmt.Errorf("package %s: %w", src, err)
	}
	return waczResource{Name: filepath.Base(name), Path: name,
		Hash: "sha256:" + hex.EncodeToString(hc.h.Sum(nil)), Bytes: hc.n}, nil
}

func zipBytes(zw *zip.Writer, name string, b []byte) error {
	zf, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Now()})
	if err != nil {
		return err
	}
	_, err = zf.Write(b)
	return err
}
