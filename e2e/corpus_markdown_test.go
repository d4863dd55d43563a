package e2e

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/simweb"
)

// checkMarkdown exports the corpus of a finished crawl with `crawlnode export --format jsonl`
// and `--format markdown`, and holds the Markdown to simweb's ground truth: every kept page
// with planted text has Markdown, with the page's <h1> title as a Markdown heading (where the
// text has the title) and the planted paragraphs; no planted boilerplate (navigation, cookie
// banner, newsletter, advertising, footer) is in it; and the Markdown tree has one file for
// each such record, under its host, whose front matter names it.
func checkMarkdown(t *testing.T, w *simweb.Web, data string) {
	dir := t.TempDir()
	jsonl, tree := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "md")
	for _, args := range [][]string{{"--format", "jsonl", "--out", jsonl}, {"--format", "markdown", "--out", tree}} {
		if o, err := exec.Command(crawlnodeBin, append([]string{"export", "--data", data}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("export %v: %v\n%s", args, err, o)
		}
	}
	f, err := os.Open(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	withMD := map[string]bool{}
	var pages, noMD, titled, headed, paraWords, keptWords, bpTotal, bpLeaks, bpLeaksNotInText int
	for sc.Scan() {
		var r corpus.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("exported line: %v", err)
		}
		if r.Markdown != "" {
			withMD[r.URL] = true
		}
		pi, ok := w.Page(canon(r.URL))
		if !ok || len(pi.MainText) == 0 || r.Text == "" {
			continue
		}
		pages++
		if r.Markdown == "" {
			noMD++
			continue
		}
		md, text := " "+corpus.NormalizeText(r.Markdown)+" ", " "+corpus.NormalizeText(r.Text)+" "
		if title := corpus.NormalizeText(pi.Title); title != "" && strings.Contains(text, " "+title+" ") {
			titled++
			for _, line := range strings.Split(r.Markdown, "\n") {
				if strings.HasPrefix(line, "# ") && corpus.NormalizeText(line) == title {
					headed++
					break
				}
			}
		}
		for _, p := range pi.MainText {
			n := corpus.NormalizeText(p)
			words := strings.Count(n, " ") + 1
			paraWords += words
			if strings.Contains(md, " "+n+" ") {
				keptWords += words
			}
		}
		for _, b := range pi.Boilerplate {
			bpTotal++
			n := " " + corpus.NormalizeText(b) + " "
			if strings.Contains(md, n) {
				bpLeaks++
				if !strings.Contains(text, n) {
					bpLeaksNotInText++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	// The tree: one file a record with Markdown, named for its URL in front matter.
	files := map[string]bool{}
	err = filepath.WalkDir(tree, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		head, _, ok := strings.Cut(strings.TrimPrefix(string(b), "---\n"), "\n---\n")
		var u string
		for _, line := range strings.Split(head, "\n") {
			if v, found := strings.CutPrefix(line, "url: "); found {
				json.Unmarshal([]byte(v), &u)
			}
		}
		rel, _ := filepath.Rel(tree, path)
		if !ok || !withMD[u] || files[u] || filepath.Dir(rel) != markdownHost(u) {
			t.Errorf("markdown tree file %s: front matter url %q (front matter closed %v, a record with Markdown %v, seen before %v)", rel, u, ok, withMD[u], files[u])
		}
		files[u] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("markdown over %d kept pages with planted text: %d without Markdown; title as '# ' heading on %d of %d pages whose text has it; planted text kept %d of %d words; boilerplate strings in the Markdown %d of %d (%d not in the text); export --format markdown: %d files for %d records with Markdown",
		pages, noMD, headed, titled, keptWords, paraWords, bpLeaks, bpTotal, bpLeaksNotInText, len(files), len(withMD))
	if pages == 0 {
		t.Fatal("no kept page with planted text")
	}
	if noMD > 0 {
		t.Errorf("%d kept pages without Markdown", noMD)
	}
	if titled == 0 || headed < titled {
		t.Errorf("the title is a Markdown heading on %d of %d pages whose text has it", headed, titled)
	}
	if float64(keptWords) < 0.95*float64(paraWords) {
		t.Errorf("the Markdown keeps %d of %d planted words", keptWords, paraWords)
	}
	if bpLeaksNotInText > 0 || float64(bpLeaks) > 0.05*float64(bpTotal) {
		t.Errorf("%d planted boilerplate strings in the Markdown (%d of them not in the text)", bpLeaks, bpLeaksNotInText)
	}
	if len(files) != len(withMD) {
		t.Errorf("export --format markdown wrote %d files for %d records with Markdown", len(files), len(withMD))
	}
}

// markdownHost is the tree directory of a URL's host.
func markdownHost(u string) string {
	h, _ := corpus.MarkdownPath(u)
	return h
}
