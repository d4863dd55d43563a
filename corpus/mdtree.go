package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrOutsideTree is returned for a Markdown file whose path would leave the tree's directory.
var ErrOutsideTree = errors.New("corpus: path outside the Markdown tree")

// ErrTreeNotEmpty is returned by NewMarkdownTree for a directory that already holds files.
var ErrTreeNotEmpty = errors.New("corpus: Markdown tree directory is not empty")

const (
	// mdMaxName bounds a file name's length in bytes, ".md" included: file systems allow 255,
	// and the tree must stay readable.
	mdMaxName = 128
	// mdMaxHost bounds a host directory's name.
	mdMaxHost = 100
)

// MarkdownTree writes one Markdown file a page under one directory, DIR/<host>/<name>.md, each
// with YAML front matter (url, title, language, fetched). Names come from the URL's path and
// query (MarkdownPath); two pages that would share a name get the first 8 hex digits of their
// URL's SHA-256 appended, and -2, -3... past that. Every file is created through an os.Root
// on DIR, so no name, link or "..", hostile or not, writes outside it. Not safe for
// concurrent use.
type MarkdownTree struct {
	root *os.Root
	used map[string]bool // lower-cased relative paths written, for case-insensitive file systems
}

// NewMarkdownTree creates dir if needed and opens it as a tree. It refuses a directory that
// already holds files (ErrTreeNotEmpty), so a tree is one export and nothing else.
func NewMarkdownTree(dir string) (*MarkdownTree, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("corpus: markdown tree: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("corpus: markdown tree: %w", err)
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrTreeNotEmpty, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("corpus: markdown tree: %w", err)
	}
	return &MarkdownTree{root: root, used: map[string]bool{}}, nil
}

// Close releases the tree's directory.
func (t *MarkdownTree) Close() error { return t.root.Close() }

// Write writes r's Markdown (its text where the record has none, as in shards written before
// Markdown) and returns the file's path relative to the tree. A record with neither is
// skipped: "" and no error.
func (t *MarkdownTree) Write(r *Record) (string, error) {
	body := r.Markdown
	if body == "" {
		body = r.Text
	}
	if body == "" {
		return "", nil
	}
	host, name := MarkdownPath(r.URL)
	rel := t.claim(host, name, r.URL)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %q", ErrOutsideTree, rel)
	}
	if err := t.root.MkdirAll(host, 0o755); err != nil {
		return "", fmt.Errorf("corpus: markdown tree: %w", err)
	}
	f, err := t.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("corpus: markdown tree: %w", err)
	}
	_, err = f.Write(MarkdownFile(r, body))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("corpus: markdown tree: %w", err)
	}
	return rel, nil
}

// claim returns a relative path for the page not used before in this tree.
func (t *MarkdownTree) claim(host, name, rawURL string) string {
	stem := strings.TrimSuffix(name, ".md")
	cands := []string{stem, withSuffix(stem, "-"+urlDigest(rawURL))}
	for i := 0; ; i++ {
		var s string
		if i < len(cands) {
			s = cands[i]
		} else {
			s = withSuffix(cands[1], "-"+strconv.Itoa(i))
		}
		rel := path.Join(host, s+".md")
		if key := strings.ToLower(rel); !t.used[key] {
			t.used[key] = true
			return filepath.FromSlash(rel)
		}
	}
}

// withSuffix appends suffix to stem, cutting stem so that the name stays within mdMaxName.
func withSuffix(stem, suffix string) string {
	if max := mdMaxName - len(".md") - len(suffix); len(stem) > max {
		stem = stem[:max]
	}
	return stem + suffix
}

func urlDigest(rawURL string) string {
	h := sha256.Sum256([]byte(rawURL))
	return hex.EncodeToString(h[:4])
}

// MarkdownPath returns the host directory and file name of a page's Markdown file: the host
// (lower case, ":port" as "_port"), and the URL's path and query with every byte outside
// [A-Za-z0-9._-] turned into '_' (runs of them into one), a trailing .html/.htm dropped,
// "index" for the root, no leading dot, and ".md" appended. Both stay within their bounds
// (mdMaxHost, mdMaxName); a name cut short ends in the first 8 hex digits of the URL's
// SHA-256 so that long URLs sharing a prefix do not collide. Neither can be "." or ".." or
// hold a separator.
func MarkdownPath(rawURL string) (host, name string) {
	u, err := url.Parse(rawURL)
	var p string
	if err == nil {
		host = strings.ToLower(u.Hostname())
		if port := u.Port(); port != "" {
			host += "_" + port
		}
		p = u.EscapedPath()
		if u.RawQuery != "" {
			p += "_" + u.RawQuery
		}
	} else {
		p = rawURL
	}
	host = safeName(host)
	if host == "" {
		host = "_"
	}
	if len(host) > mdMaxHost {
		host = host[:mdMaxHost-9] + "-" + urlDigest(host)
	}
	lower := strings.ToLower(p)
	for _, ext := range []string{".html", ".htm"} {
		if strings.HasSuffix(lower, ext) {
			p = p[:len(p)-len(ext)]
			break
		}
	}
	stem := safeName(p)
	if stem == "" {
		stem = "index"
	}
	if len(stem) > mdMaxName-len(".md") {
		stem = withSuffix(stem, "-"+urlDigest(rawURL))
	}
	return host, stem + ".md"
}

// safeName keeps [A-Za-z0-9.-], turns runs of other bytes into one '_', and trims '_' and
// '.' from the ends (no hidden files, no "." or "..").
func safeName(s string) string {
	var b strings.Builder
	under := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			b.WriteByte(c)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.Trim(b.String(), "_.")
}

// MarkdownFile is a Markdown file of the tree: YAML front matter (url, title, language, and
// fetched, the fetch time in RFC 3339 UTC), a blank line, then body. Strings are written as
// JSON strings, which YAML reads as double-quoted scalars, so no title can break out of
// the front matter.
func MarkdownFile(r *Record, body string) []byte {
	var b bytes.Buffer
	q := func(s string) string {
		var sb bytes.Buffer
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		return strings.TrimSuffix(sb.String(), "\n")
	}
	b.WriteString("---\n")
	b.WriteString("url: " + q(r.URL) + "\n")
	if r.Title != "" {
		b.WriteString("title: " + q(r.Title) + "\n")
	}
	if r.Language != "" {
		b.WriteString("language: " + q(r.Language) + "\n")
	}
	if !r.FetchTime.IsZero() {
		b.WriteString("fetched: " + r.FetchTime.UTC().Format(time.RFC3339) + "\n")
	}
	b.WriteString("---\n\n")
	b.WriteString(strings.TrimSpace(body))
	b.WriteByte('\n')
	return b.Bytes()
}
