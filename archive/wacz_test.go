package archive

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readWACZ opens a package with archive/zip and checks it against WACZ 1.1.1: the required
// files, every resource's sha256 and size, the digest of datapackage.json. It returns the
// files by name.
func readWACZ(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip file: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if strings.HasSuffix(f.Name, ".warc.gz") && f.Method != zip.Store {
			t.Fatalf("%s is re-compressed (method %d)", f.Name, f.Method)
		}
	}
	for _, req := range []string{"datapackage.json", "datapackage-digest.json", "indexes/index.cdxj", "pages/pages.jsonl"} {
		if _, ok := files[req]; !ok {
			t.Fatalf("package lacks %s", req)
		}
	}
	var dp struct {
		Profile   string `json:"profile"`
		Version   string `json:"wacz_version"`
		Created   string `json:"created"`
		Software  string `json:"software"`
		Resources []struct {
			Name, Path, Hash string
			Bytes            int64
		} `json:"resources"`
	}
	if err := json.Unmarshal(files["datapackage.json"], &dp); err != nil {
		t.Fatal(err)
	}
	if dp.Profile != "data-package" || dp.Version != "1.1.1" || dp.Software == "" {
		t.Fatalf("datapackage.json: %+v", dp)
	}
	if _, err := time.Parse(time.RFC3339, dp.Created); err != nil {
		t.Fatalf("created %q: %v", dp.Created, err)
	}
	listed := map[string]bool{}
	for _, r := range dp.Resources {
		data, ok := files[r.Path]
		sum := sha256.Sum256(data)
		if !ok || r.Hash != "sha256:"+hex.EncodeToString(sum[:]) || r.Bytes != int64(len(data)) || r.Name != filepath.Base(r.Path) {
			t.Fatalf("resource %+v: present %v, %d bytes, sha256 %x", r, ok, len(data), sum)
		}
		listed[r.Path] = true
	}
	for name := range files {
		if !listed[name] && name != "datapackage.json" && name != "datapackage-digest.json" {
			t.Fatalf("%s is not listed in datapackage.json", name)
		}
	}
	var dg struct{ Path, Hash string }
	if err := json.Unmarshal(files["datapackage-digest.json"], &dg); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(files["datapackage.json"])
	if dg.Path != "datapackage.json" || dg.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("datapackage-digest.json %+v", dg)
	}
	return files
}

func TestWriteWACZ(t *testing.T) {
	cfg, warcs := indexedCrawl(t)
	dir := cfg.Dir
	bad := filepath.Join(dir, "bad-20250304050607-00099-n1.warc.gz")
	if err := os.WriteFile(bad, []byte{0x1f, 0x8b, 0x08, 0, 1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var skipped []string
	st, err := WriteWACZ(&out, WACZOptions{WARCs: append(warcs, bad), Title: "test crawl", Software: "crawlnode test",
		PageTitle: func(u string) string {
			if u == "http://example.com/" {
				return "Example <home>"
			}
			return ""
		},
		OnDamage: func(p string, err error) { skipped = append(skipped, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0] != bad {
		t.Fatalf("skipped %v", skipped)
	}
	files := readWACZ(t, out.Bytes())
	// The WARC files are there byte for byte, the damaged one too (it has no index lines).
	for _, p := range append(warcs, bad) {
		want, _ := os.ReadFile(p)
		if !bytes.Equal(files["archive/"+filepath.Base(p)], want) {
			t.Fatalf("archive/%s differs from the WARC file", filepath.Base(p))
		}
	}
	if int(st.WARCs) != len(warcs)+1 {
		t.Fatalf("%d warcs packaged, want %d", st.WARCs, len(warcs)+1)
	}
	// Every index line is found again in the packaged WARC files.
	unpacked := t.TempDir()
	for _, p := range warcs {
		if err := os.WriteFile(filepath.Join(unpacked, filepath.Base(p)), files["archive/"+filepath.Base(p)], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx := strings.Split(strings.TrimSuffix(string(files["indexes/index.cdxj"]), "\n"), "\n")
	if int64(len(idx)) != st.IndexLines {
		t.Fatalf("%d index lines, stats say %d", len(idx), st.IndexLines)
	}
	byFile := map[string][]string{}
	for _, l := range idx {
		_, _, e, err := ParseIndexLine(l)
		if err != nil {
			t.Fatal(err)
		}
		byFile[e.Filename] = append(byFile[e.Filename], l)
	}
	for name, lines := range byFile {
		p := filepath.Join(unpacked, name)
		if err := os.WriteFile(p+IndexSuffix, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		checkIndexFile(t, p)
	}
	// pages.jsonl: the header line, then the 200 text/html captures, one a URL.
	sc := bufio.NewScanner(bytes.NewReader(files["pages/pages.jsonl"]))
	sc.Scan()
	var head map[string]string
	if err := json.Unmarshal(sc.Bytes(), &head); err != nil || head["format"] != "json-pages-1.0" || head["id"] != "pages" || head["title"] != "test crawl" {
		t.Fatalf("pages header %q: %v", sc.Text(), err)
	}
	urls := map[string]bool{}
	titled := false
	for sc.Scan() {
		var p struct{ URL, TS, Title string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("page line %q: %v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339, p.TS); err != nil || p.URL == "" || urls[p.URL] {
			t.Fatalf("page line %q", sc.Text())
		}
		urls[p.URL] = true
		titled = titled || p.Title == "Example <home>"
	}
	// 40 responses, 4 of them 404 and text/plain.
	if len(urls) != 36 || int(st.Pages) != 36 || !titled {
		t.Fatalf("%d pages (stats %d), title found %v", len(urls), st.Pages, titled)
	}
}
