package simweb

import (
	"io"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/net/html"
)

// scriptOf is the Unicode script each language's main text must be written in.
var scriptOf = map[string]*unicode.RangeTable{
	"en": unicode.Latin, "de": unicode.Latin, "fr": unicode.Latin, "es": unicode.Latin,
	"ru": unicode.Cyrillic, "zh": unicode.Han, "ja": unicode.Hiragana, "ar": unicode.Arabic,
	"hi": unicode.Devanagari,
}

func htmlLang(t *testing.T, body io.Reader) (string, bool) {
	t.Helper()
	doc, err := html.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	for n := doc.FirstChild; n != nil; n = n.NextSibling {
		if n.Type == html.ElementNode && n.Data == "html" {
			for _, a := range n.Attr {
				if a.Key == "lang" {
					return a.Val, true
				}
			}
			return "", false
		}
	}
	return "", false
}

func TestLanguagesServedAndKnown(t *testing.T) {
	c := smallConfig()
	c.Languages = true
	w, cl := startWeb(t, c)
	byLang := map[string]int{}
	byAttr := map[string]int{}
	n := 0
	w.textPages(func(d *doc) {
		if n >= 400 {
			return
		}
		n++
		pi, ok := w.Page(d.url)
		if !ok || pi.Status != 200 {
			return
		}
		if pi.Language == "" {
			t.Fatalf("%s: no language in the oracle", d.url)
		}
		byLang[pi.Language]++
		byAttr[pi.LangAttrIs]++
		sc := scriptOf[pi.Language]
		text := strings.Join(pi.MainText, " ")
		in, all := 0, 0
		for _, r := range text {
			if unicode.IsLetter(r) {
				all++
				if unicode.Is(sc, r) {
					in++
				}
			}
		}
		if all == 0 || float64(in)/float64(all) < 0.3 {
			t.Errorf("%s (%s): %d of %d letters in the language's script", d.url, pi.Language, in, all)
		}
		resp, err := cl.Get(d.url)
		if err != nil {
			t.Fatal(err)
		}
		got, has := htmlLang(t, resp.Body)
		resp.Body.Close()
		if got != pi.LangAttr || has != (pi.LangAttr != "") {
			t.Errorf("%s: served lang=%q (present %v), oracle says %q", d.url, got, has, pi.LangAttr)
		}
		switch pi.LangAttrIs {
		case LangAttrRight:
			if got != pi.Language {
				t.Errorf("%s: right lang attribute %q for %s", d.url, got, pi.Language)
			}
		case LangAttrWrong:
			if got == pi.Language || got == "" {
				t.Errorf("%s: wrong lang attribute %q for %s", d.url, got, pi.Language)
			}
		}
	})
	for _, l := range Languages {
		if byLang[l] == 0 {
			t.Errorf("no page in %s: %v", l, byLang)
		}
	}
	for _, k := range []string{LangAttrRight, LangAttrNone, LangAttrWrong} {
		if byAttr[k] == 0 {
			t.Errorf("no page with lang attribute %s: %v", k, byAttr)
		}
	}
	t.Logf("pages by language %v, by lang attribute %v", byLang, byAttr)
}

// TestLanguagesOffIsEnglish: without Config.Languages every page is English with lang="en".
func TestLanguagesOffIsEnglish(t *testing.T) {
	w, err := New(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	w.textPages(func(d *doc) {
		if n >= 100 {
			return
		}
		n++
		pi, ok := w.Page(d.url)
		if !ok || pi.Status != 200 {
			return
		}
		if pi.Language != "en" || pi.LangAttr != "en" || pi.LangAttrIs != LangAttrRight {
			t.Errorf("%s: language %q attr %q (%s), want en everywhere", d.url, pi.Language, pi.LangAttr, pi.LangAttrIs)
		}
	})
}
