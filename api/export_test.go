package api

import (
	"encoding/json"
	"errors"
	"testing"
)

func exportFake() *fakeBackend {
	f := newFake()
	f.exportFiles = []ExportFile{
		{Kind: ExportKindWARC, Name: "crawl-20260101000000-00001-n1.warc.gz", Size: 10},
		{Kind: ExportKindCDXJ, Name: "crawl-20260101000000-00001-n1.warc.gz.cdxj", Size: 4},
		{Kind: ExportKindWARC, Name: "crawl-20260101000000-00002-n1.warc.gz", Size: 6, Open: true},
		{Kind: ExportKindCorpus, Name: "corpus-n1-000000.jsonl.zst.partial", Size: 3, Open: true},
	}
	f.exportData = map[string]string{
		"warc/crawl-20260101000000-00001-n1.warc.gz":      "0123456789",
		"cdxj/crawl-20260101000000-00001-n1.warc.gz.cdxj": "idx\n",
		// The open file holds more than its durable size: only the durable part is served.
		"warc/crawl-20260101000000-00002-n1.warc.gz": "abcdefTORN",
		"corpus/corpus-n1-000000.jsonl.zst.partial":  "xyzTORN",
	}
	return f
}

// The export routes: a listing, files served up to their durable size (ranges too), path
// traversal and foreign names refused before the backend is asked, and the token required
// for every export read when one is set.
func TestExportRoutes(t *testing.T) {
	const w1 = "/v1/export/files/warc/crawl-20260101000000-00001-n1.warc.gz"
	const w2 = "/v1/export/files/warc/crawl-20260101000000-00002-n1.warc.gz"
	for _, tc := range []struct {
		name       string
		token      string
		path       string
		hdr        []string
		want       int
		wantBody   string // exact body for 200/206
		wantCode   string // error code otherwise
		wantOpened bool
	}{
		{name: "closed file whole", path: w1, want: 200, wantBody: "0123456789", wantOpened: true},
		{name: "open file: durable part only", path: w2, want: 200, wantBody: "abcdef", wantOpened: true},
		{name: "range", path: w1, hdr: []string{"Range", "bytes=4-"}, want: 206, wantBody: "456789", wantOpened: true},
		{name: "range past the durable part", path: w2, hdr: []string{"Range", "bytes=6-"}, want: 416, wantOpened: true},
		{name: "index", path: "/v1/export/files/cdxj/crawl-20260101000000-00001-n1.warc.gz.cdxj", want: 200, wantBody: "idx\n", wantOpened: true},
		{name: "open shard", path: "/v1/export/files/corpus/corpus-n1-000000.jsonl.zst.partial", want: 200, wantBody: "xyz", wantOpened: true},
		{name: "not held", path: "/v1/export/files/warc/other-n2.warc.gz", want: 404, wantCode: "not_found", wantOpened: true},
		{name: "unknown kind", path: "/v1/export/files/badger/MANIFEST", want: 400, wantCode: "bad_kind"},
		{name: "escaped traversal", path: "/v1/export/files/warc/..%2F..%2Fetc%2Fpasswd.warc.gz", want: 400, wantCode: "bad_name"},
		{name: "escaped slash", path: "/v1/export/files/corpus/sub%2Fcorpus-n1-000000.jsonl.zst", want: 400, wantCode: "bad_name"},
		{name: "dot-dot name", path: "/v1/export/files/warc/..warc.gz", want: 400, wantCode: "bad_name"},
		{name: "backslash", path: "/v1/export/files/warc/a%5C..%5Cb.warc.gz", want: 400, wantCode: "bad_name"},
		{name: "wrong suffix for kind", path: "/v1/export/files/warc/node.json", want: 400, wantCode: "bad_name"},
		{name: "corpus kind, warc name", path: "/v1/export/files/corpus/crawl-1-n1.warc.gz", want: 400, wantCode: "bad_name"},
		{name: "control byte", path: "/v1/export/files/warc/a%00.warc.gz", want: 400, wantCode: "bad_name"},
		{name: "token: listing without", token: "s3cret", path: "/v1/export/files", want: 401, wantCode: "unauthorized"},
		{name: "token: file without", token: "s3cret", path: w1, want: 401, wantCode: "unauthorized"},
		{name: "token: file, wrong", token: "s3cret", path: w1, hdr: []string{"Authorization", "Bearer nope"}, want: 401, wantCode: "unauthorized"},
		{name: "token: file", token: "s3cret", path: w1, hdr: []string{"Authorization", "Bearer s3cret"}, want: 200, wantBody: "0123456789", wantOpened: true},
	} {
		f := exportFake()
		h := New(Config{Token: tc.token}, f)
		code, body, hdr := do(t, h, "GET", tc.path, "", tc.hdr...)
		if code != tc.want {
			t.Errorf("%s: GET %s: %d %s, want %d", tc.name, tc.path, code, body, tc.want)
			continue
		}
		if tc.wantBody != "" && body != tc.wantBody {
			t.Errorf("%s: body %q, want %q", tc.name, body, tc.wantBody)
		}
		if tc.wantBody != "" && hdr.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("%s: Content-Type %q", tc.name, hdr.Get("Content-Type"))
		}
		if tc.wantCode != "" && errorCode(body) != tc.wantCode {
			t.Errorf("%s: error %s, want code %s", tc.name, body, tc.wantCode)
		}
		if opened := len(f.opened) > 0; opened != tc.wantOpened {
			t.Errorf("%s: backend asked %v, want asked=%v", tc.name, f.opened, tc.wantOpened)
		}
	}
}

// An unescaped ../ never reaches the handler: the router cleans the path and redirects.
func TestExportPathCleaned(t *testing.T) {
	f := exportFake()
	code, _, hdr := do(t, New(Config{}, f), "GET", "/v1/export/files/warc/../../../etc/passwd", "")
	if code/100 != 3 || len(f.opened) != 0 {
		t.Fatalf("GET with ../: %d (Location %q), backend asked %v", code, hdr.Get("Location"), f.opened)
	}
}

func TestExportListing(t *testing.T) {
	f := exportFake()
	code, body, _ := do(t, New(Config{}, f), "GET", "/v1/export/files", "")
	var l ExportListing
	if code != 200 || json.Unmarshal([]byte(body), &l) != nil {
		t.Fatalf("listing: %d %s", code, body)
	}
	if l.Node != "n1" || len(l.Files) != 4 || !l.Files[2].Open || l.Files[2].Size != 6 {
		t.Fatalf("listing %+v", l)
	}
	f.exportFiles = nil
	if code, body, _ = do(t, New(Config{}, f), "GET", "/v1/export/files", ""); code != 200 || json.Unmarshal([]byte(body), &l) != nil || l.Files == nil || len(l.Files) != 0 {
		t.Fatalf("empty listing: %d %s", code, body)
	}
	f.exportErr = errors.New("disk gone")
	if code, body, _ = do(t, New(Config{}, f), "GET", "/v1/export/files", ""); code != 500 || errorCode(body) != "storage" {
		t.Fatalf("failing listing: %d %s", code, body)
	}
}
