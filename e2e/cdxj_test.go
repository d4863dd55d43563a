package e2e

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestExportCDXJAndWACZ crawls a small web, then judges `export --format cdxj` and
// `--format wacz` with the independent WARC reader: every CDXJ line names a gzip member that
// holds the record it describes (URL, payload digest, status), every response and revisit of
// the data directory has a line, lines are sorted; the WACZ opens as a zip, every resource's
// sha256 and size match, the page list is valid. A damaged WARC file is named with the offset
// of its damage, and the other files' lines are exported unchanged.
func TestExportCDXJAndWACZ(t *testing.T) {
	if testing.Short() {
		t.Skip("crawl")
	}
	w, addr := web(t, func(c *simweb.Config) {
		c.Hosts, c.Seed = 8, 3
		c.SlowHosts, c.TrickleHosts, c.HugeHosts = 0, 0, 0
	})
	data := filepath.Join(t.TempDir(), "data")
	c := startCrawler(t, crawlArgs(data, addr, w, t, "--max-pages", "400")...)
	if code := c.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("crawl exited %d:\n%s", code, tail(c.stderr.String(), 3000))
	}
	files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	type member struct {
		file     string
		off, len int64
	}
	recs := map[member]*warcRec{}
	for _, f := range files {
		if _, err := os.Stat(f + ".cdxj"); err != nil {
			t.Errorf("no index beside %s after the node stopped: %v", filepath.Base(f), err)
		}
		if err := readWARCFile(f, true, func(r *warcRec) error {
			if r.Type() == "response" || r.Type() == "revisit" {
				recs[member{filepath.Base(f), r.Offset, r.MemberLen}] = r
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	out := filepath.Join(t.TempDir(), "index.cdxj")
	if o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "cdxj", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("export cdxj: %v\n%s", err, o)
	}
	b, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !slices.IsSorted(lines) {
		t.Error("export --format cdxj is not sorted")
	}
	indexed := map[member]bool{}
	html200 := map[string]bool{}
	for _, l := range lines {
		parts := strings.SplitN(l, " ", 3)
		var f map[string]string
		if len(parts) != 3 || len(parts[1]) != 14 || json.Unmarshal([]byte(parts[2]), &f) != nil {
			t.Fatalf("bad cdxj line %q", l)
		}
		off, _ := strconv.ParseInt(f["offset"], 10, 64)
		n, _ := strconv.ParseInt(f["length"], 10, 64)
		m := member{f["filename"], off, n}
		r := recs[m]
		if r == nil {
			t.Fatalf("line %q: no response or revisit member at %+v", l, m)
		}
		indexed[m] = true
		hdr, _, _ := httpParts(r.Block)
		status := strings.Fields(string(hdr))
		if r.Get("WARC-Target-URI") != f["url"] || r.Get("WARC-Payload-Digest") != f["digest"] || len(status) < 2 || status[1] != f["status"] {
			t.Fatalf("line %q: record says %s %s %v", l, r.Get("WARC-Target-URI"), r.Get("WARC-Payload-Digest"), status[:2])
		}
		if r.Type() == "response" && sha1Base32(r.payload()) != f["digest"] {
			t.Fatalf("line %q: payload digest %s", l, sha1Base32(r.payload()))
		}
		if f["mime"] == "text/html" && f["status"] == "200" {
			html200[f["url"]] = true
		}
	}
	if len(indexed) != len(recs) || len(lines) != len(recs) {
		t.Errorf("%d cdxj lines, %d members found, %d response/revisit records in the WARC files", len(lines), len(indexed), len(recs))
	}

	wacz := filepath.Join(t.TempDir(), "crawl.wacz")
	if o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "wacz", "--out", wacz).CombinedOutput(); err != nil {
		t.Fatalf("export wacz: %v\n%s", err, o)
	}
	pages := checkWACZ(t, wacz, len(files), b)
	if len(pages) == 0 || len(pages) != len(html200) {
		t.Errorf("pages.jsonl lists %d pages, the index %d HTML pages with status 200", len(pages), len(html200))
	}
	t.Logf("%d WARC files, %d cdxj lines, all found by the independent reader; wacz with %d pages", len(files), len(lines), len(pages))

	// A damaged WARC file without an index: named with the offset, the others exported.
	bad := filepath.Join(data, "warc", "crawlnode-20250101000000-99999-zz.warc.gz")
	os.WriteFile(bad, []byte("\x1f\x8b\x08\x00 not a gzip member"), 0o644)
	o, err := exec.Command(crawlnodeBin, "export", "--data", data, "--format", "cdxj", "--out", out).CombinedOutput()
	b2, _ := os.ReadFile(out)
	if err == nil || !strings.Contains(string(o), bad) || !strings.Contains(string(o), "offset 0") || !bytes.Equal(b, b2) {
		t.Errorf("export cdxj with a damaged file: err %v, %d bytes (want %d), said: %s", err, len(b2), len(b), o)
	}
}

// checkWACZ opens a WACZ file with archive/zip and checks it against WACZ 1.1.1; it returns
// the page URLs.
func checkWACZ(t *testing.T, path string, warcs int, index []byte) map[string]bool {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("wacz is not a zip file: %v", err)
	}
	defer zr.Close()
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		files[f.Name] = buf.Bytes()
	}
	var dp struct {
		Profile   string `json:"profile"`
		Version   string `json:"wacz_version"`
		Resources []struct {
			Path, Hash string
			Bytes      int
		} `json:"resources"`
	}
	if err := json.Unmarshal(files["datapackage.json"], &dp); err != nil || dp.Profile != "data-package" || dp.Version != "1.1.1" {
		t.Fatalf("datapackage.json: %+v %v", dp, err)
	}
	nWARC := 0
	for _, r := range dp.Resources {
		sum := sha256.Sum256(files[r.Path])
		if _, ok := files[r.Path]; !ok || r.Hash != "sha256:"+hex.EncodeToString(sum[:]) || r.Bytes != len(files[r.Path]) {
			t.Errorf("resource %s: hash %s, %d bytes in the zip", r.Path, r.Hash, len(files[r.Path]))
		}
		if strings.HasPrefix(r.Path, "archive/") {
			nWARC++
		}
	}
	sum := sha256.Sum256(files["datapackage.json"])
	var dg struct{ Path, Hash string }
	if json.Unmarshal(files["datapackage-digest.json"], &dg); dg.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("datapackage-digest.json %+v", dg)
	}
	if nWARC != warcs || !bytes.Equal(files["indexes/index.cdxj"], index) {
		t.Errorf("wacz has %d of %d WARC files; index equal to export --format cdxj: %v", nWARC, warcs, bytes.Equal(files["indexes/index.cdxj"], index))
	}
	pages := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(files["pages/pages.jsonl"]))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		var p map[string]string
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("pages.jsonl line %d: %v", i+1, err)
		}
		if i == 0 {
			if p["format"] != "json-pages-1.0" || p["id"] != "pages" {
				t.Fatalf("pages.jsonl header %v", p)
			}
			continue
		}
		if _, err := time.Parse(time.RFC3339, p["ts"]); err != nil || p["url"] == "" {
			t.Fatalf("pages.jsonl line %d: %v", i+1, p)
		}
		pages[p["url"]] = true
	}
	return pages
}
