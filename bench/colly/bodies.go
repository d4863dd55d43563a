package main

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/net/html"
)

// loadBodies reads the HTML files glob matches and returns, for each whose body is
// between minBytes and maxBytes once rendered, the inner HTML of its <body> with every
// URL it holds neutralised (simweb.Config.Bodies): the markup, text, inline scripts and
// styles stay as they were, so a crawler tokenizes and stores what a real page costs it,
// but it finds no link to follow there: an href becomes a fragment of the page itself
// ("#" and a hash of the old value, as long as a short link), any other URL attribute
// "data:,", and <base>, <link>, <meta>, <noframes> and <noembed> (whose content the parser
// keeps as raw text, which a crawler may read as markup) are dropped. The links a crawler
// follows are simweb's own, which it adds around the fragment.
func loadBodies(glob string, minBytes, maxBytes int) (bodies [][]byte, files int, err error) {
	paths, err := filepath.Glob(glob)
	if err != nil {
		return nil, 0, fmt.Errorf("-bodies %q: %w", glob, err)
	}
	if len(paths) == 0 {
		return nil, 0, fmt.Errorf("-bodies %q: no file matches", glob)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, 0, err
		}
		// Scripting off: <noscript>'s content is parsed as markup (as crawlers read it, and
		// as tracking pixels hide their URLs there), so its URLs are neutralised too.
		doc, err := html.ParseWithOptions(bytes.NewReader(raw), html.ParseOptionEnableScripting(false))
		if err != nil { // html.Parse accepts any input; an error is a read error
			return nil, 0, fmt.Errorf("%s: %w", p, err)
		}
		body := findBody(doc)
		if body == nil {
			continue
		}
		neutralise(body)
		var b bytes.Buffer
		for c := body.FirstChild; c != nil; c = c.NextSibling {
			if err := html.Render(&b, c); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", p, err)
			}
		}
		if b.Len() >= minBytes && b.Len() <= maxBytes {
			bodies = append(bodies, b.Bytes())
		}
	}
	if len(bodies) == 0 {
		return nil, len(paths), fmt.Errorf("-bodies %q: none of %d files has a body of %d-%d bytes", glob, len(paths), minBytes, maxBytes)
	}
	return bodies, len(paths), nil
}

func findBody(n *html.Node) *html.Node {
	if n.Type == html.ElementNode && n.Data == "body" {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if b := findBody(c); b != nil {
			return b
		}
	}
	return nil
}

// urlAttrs are the attributes that hold a URL (HTML's, and the lazy-loading ones pages use).
var urlAttrs = map[string]bool{
	"src": true, "srcset": true, "action": true, "formaction": true, "poster": true, "data": true,
	"cite": true, "background": true, "longdesc": true, "usemap": true, "ping": true,
	"manifest": true, "codebase": true, "archive": true, "lowsrc": true, "xlink:href": true,
	"data-src": true, "data-srcset": true, "data-href": true, "data-url": true,
}

func neutralise(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && (c.Data == "base" || c.Data == "link" || c.Data == "meta" ||
			c.Data == "noframes" || c.Data == "noembed") {
			n.RemoveChild(c)
		} else {
			neutralise(c)
		}
		c = next
	}
	if n.Type != html.ElementNode {
		return
	}
	for i := range n.Attr {
		a := &n.Attr[i]
		switch key := strings.ToLower(a.Key); {
		case key == "href":
			h := fnv.New32a()
			h.Write([]byte(a.Val))
			a.Val = fmt.Sprintf("#r%08x", h.Sum32())
		case urlAttrs[key]:
			a.Val = "data:,"
		}
	}
}
