package corpus

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMarkdownPath(t *testing.T) {
	long := "http://h.sim.test/" + strings.Repeat("very-long-segment/", 300)
	cases := []struct{ url, host, name string }{
		{"http://h.sim.test/", "h.sim.test", "index.md"},
		{"http://h.sim.test", "h.sim.test", "index.md"},
		{"http://H.Sim.Test:8080/a/b/c.html", "h.sim.test_8080", "a_b_c.md"},
		{"http://h.sim.test/docs/Guide.HTM", "h.sim.test", "docs_Guide.md"},
		{"http://h.sim.test/search?q=a+b&x=1", "h.sim.test", "search_q_a_b_x_1.md"},
		{"http://h.sim.test/a/../../etc/passwd", "h.sim.test", "a_.._.._etc_passwd.md"},
		{"http://h.sim.test/%2e%2e/%2e%2e/x", "h.sim.test", "2e_2e_2e_2e_x.md"},
		{"http://h.sim.test/.hidden", "h.sim.test", "hidden.md"},
		{"http://h.sim.test/...", "h.sim.test", "index.md"},
		{"http://h.sim.test/caf%C3%A9/men%C3%BC", "h.sim.test", "caf_C3_A9_men_C3_BC.md"},
		{"http://../x", "_", "x.md"},
		{"http://h.sim.test/a\\..\\b", "h.sim.test", "a_5C.._5Cb.md"}, // EscapedPath: %5C
	}
	for _, c := range cases {
		host, name := MarkdownPath(c.url)
		if host != c.host || name != c.name {
			t.Errorf("MarkdownPath(%q) = %q, %q; want %q, %q", c.url, host, name, c.host, c.name)
		}
	}
	// Every name is one local path element within its bound, whatever the URL.
	hostile := []string{long, long + "x", "http://" + strings.Repeat("a", 300) + ".test/", "http://h.sim.test/..%2f..%2f",
		"http://h.sim.test/\x00nul", "http://h.sim.test/" + strings.Repeat("é", 200), "not a url at all/../..", ""}
	for _, c := range cases {
		hostile = append(hostile, c.url)
	}
	for _, u := range hostile {
		host, name := MarkdownPath(u)
		for _, part := range []string{host, name} {
			if !filepath.IsLocal(part) || strings.ContainsAny(part, `/\`) || part == "." || part == ".." || strings.HasPrefix(part, ".") {
				t.Errorf("MarkdownPath(%.60q): unsafe part %q", u, part)
			}
		}
		if len(name) > mdMaxName || len(host) > mdMaxHost || !strings.HasSuffix(name, ".md") {
			t.Errorf("MarkdownPath(%.60q): host %d bytes, name %q (%d bytes)", u, len(host), name, len(name))
		}
	}
	_, n1 := MarkdownPath(long)
	_, n2 := MarkdownPath(long + "x")
	if n1 == n2 || !strings.HasSuffix(n1, "-"+urlDigest(long)+".md") {
		t.Errorf("long URLs sharing a prefix: %q and %q", n1, n2)
	}
}

// frontMatter splits a Markdown file into its front matter (key -> raw value) and body.
func frontMatter(t *testing.T, b []byte) (map[string]string, string) {
	t.Helper()
	s := string(b)
	if !strings.HasPrefix(s, "---\n") {
		t.Fatalf("no front matter: %.80q", s)
	}
	head, body, ok := strings.Cut(s[4:], "\n---\n\n")
	if !ok {
		t.Fatalf("front matter not closed: %.200q", s)
	}
	fm := map[string]string{}
	for _, line := range strings.Split(head, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("front matter line %q", line)
		}
		fm[k] = v
	}
	return fm, body
}

func TestMarkdownTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "md")
	tree, err := NewMarkdownTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	recs := []Record{
		{URL: "http://h.sim.test/a/page.html", Title: "Rivers", Language: "en", FetchTime: at, Markdown: "# Rivers\n\nText."},
		{URL: "http://h.sim.test/a/page.htm", Title: "Other", FetchTime: at, Markdown: "# Other"},             // same name
		{URL: "http://h.sim.test/A/Page.html", Title: "Case", FetchTime: at, Markdown: "# Case"},              // same name but for case
		{URL: "http://h.sim.test/a/page.html", Title: "Again", FetchTime: at.Add(time.Hour), Markdown: "# 2"}, // same URL refetched
		{URL: "http://h.sim.test/../../../etc/passwd", Title: "Evil\"\n---\ninjected: true", FetchTime: at, Markdown: "x"},
		{URL: "http://h.sim.test/old", Title: "Old shard", FetchTime: at, Text: "Plain text of an old record."},
		{URL: "http://h.sim.test/rejected", Rejected: RejectTooShort},
	}
	seen := map[string]bool{}
	for i := range recs {
		rel, err := tree.Write(&recs[i])
		if err != nil {
			t.Fatalf("write %s: %v", recs[i].URL, err)
		}
		if recs[i].Markdown == "" && recs[i].Text == "" {
			if rel != "" {
				t.Errorf("record without content written to %s", rel)
			}
			continue
		}
		if seen[strings.ToLower(rel)] {
			t.Errorf("%s: path %s used twice", recs[i].URL, rel)
		}
		seen[strings.ToLower(rel)] = true
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		fm, body := frontMatter(t, b)
		var u, title string
		json.Unmarshal([]byte(fm["url"]), &u)
		json.Unmarshal([]byte(fm["title"]), &title)
		if u != recs[i].URL || title != recs[i].Title || fm["fetched"] != recs[i].FetchTime.Format(time.RFC3339) {
			t.Errorf("%s: front matter %v", rel, fm)
		}
		if _, ok := fm["injected"]; ok {
			t.Errorf("%s: the title broke out of the front matter: %v", rel, fm)
		}
		if recs[i].Language != "" && fm["language"] != `"`+recs[i].Language+`"` {
			t.Errorf("%s: language %q", rel, fm["language"])
		}
		want := recs[i].Markdown
		if want == "" {
			want = recs[i].Text
		}
		if body != want+"\n" {
			t.Errorf("%s: body %q, want %q", rel, body, want)
		}
		if !strings.HasPrefix(rel, "h.sim.test"+string(filepath.Separator)) || strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("%s: not a file of the host's directory", rel)
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d files written, want 6", len(seen))
	}
	if _, err := NewMarkdownTree(dir); !errors.Is(err, ErrTreeNotEmpty) {
		t.Errorf("a non-empty directory: %v, want ErrTreeNotEmpty", err)
	}
}

// TestMarkdownTreeStaysInside: a host directory that turns out to be a link to elsewhere (made
// after the tree was opened) is not written through.
func TestMarkdownTreeStaysInside(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "md"), filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	tree, err := NewMarkdownTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if err := os.Symlink(outside, filepath.Join(dir, "h.sim.test")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if rel, err := tree.Write(&Record{URL: "http://h.sim.test/x", Markdown: "x"}); err == nil {
		t.Errorf("wrote %s through a link out of the tree", rel)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("files outside the tree: %v", entries)
	}
}
