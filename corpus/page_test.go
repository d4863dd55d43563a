package corpus

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// An English-looking vocabulary so that language detection sees English.
var vocab = strings.Fields(`the of and to in a is that for it as was with be by on not he this are or his
from at which but have an they you were her she there been one all we their has would when if so no will
can more other some what about time its into than only them these may such two also any new like after
first used most made over well way just even many where back how each much people year because very down
water river city garden history summer winter village mountain children teacher market music language
building morning evening street school family country government system program question number world
house place point right small large group problem fact hand part child eye woman life week company case
night work day thing story study book word business issue side kind head service friend father power
hour game line end member law car name president team minute idea body information nothing ago lead
social understand whether watch together follow around parent stop face anything create public already
speak others read level allow add office spend door health person art sure such war history party within
grow result open change morning walk offer remember love consider appear buy wait serve die send expect
build stay fall cut reach kill remain suggest raise pass sell require report decide pull`)

// genParagraphs returns n paragraphs of about words words each, deterministic for seed.
func genParagraphs(seed uint64, n, words int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for w := 0; w < words; w++ {
			word := vocab[r.IntN(len(vocab))]
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			}
			b.WriteString(word)
			switch {
			case w == words-1:
				b.WriteString(".")
			case r.IntN(12) == 0:
				b.WriteString(". ")
			case r.IntN(9) == 0:
				b.WriteString(", ")
			default:
				b.WriteString(" ")
			}
		}
		out[i] = b.String()
	}
	return out
}

// Strings of the page chrome that must not reach the corpus text.
const (
	navMarker     = "Navmarker"
	footerMarker  = "Footermarker"
	sidebarMarker = "Sidebarmarker"
	cookieMarker  = "Cookiemarker We use cookies"
)

type pageOpts struct {
	lang      string   // <html lang>
	head      []string // extra head elements (meta tags)
	navLinks  int      // default 20
	padScript int      // bytes of inline script in head
}

// genPage renders a realistic article page: header, navigation, the article, a sidebar of
// links, a cookie banner and a footer.
func genPage(title string, paras []string, o pageOpts) string {
	if o.navLinks == 0 {
		o.navLinks = 20
	}
	if o.lang == "" {
		o.lang = "en"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=%q><head><meta charset=\"utf-8\"><title>%s | Example News</title>\n", o.lang, title)
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1">` + "\n")
	b.WriteString(`<link rel="stylesheet" href="/static/site.css"><style>body{font-family:sans-serif}.nav a{padding:4px}</style>` + "\n")
	for _, h := range o.head {
		b.WriteString(h + "\n")
	}
	if o.padScript > 0 {
		b.WriteString("<script>var analytics = [")
		for i := 0; b.Len() < o.padScript; i++ {
			fmt.Fprintf(&b, "{id:%d,name:'event%d',value:%d},", i, i, i*7)
		}
		b.WriteString("];</script>\n")
	}
	b.WriteString("</head><body>\n")
	b.WriteString(`<header class="site-header"><div class="logo"><a href="/">Example News</a></div>` + "\n")
	b.WriteString(`<nav class="nav main-menu"><ul>`)
	for i := 0; i < o.navLinks; i++ {
		fmt.Fprintf(&b, `<li class="menu-item"><a href="/section/%d">%s %d</a></li>`, i, navMarker, i)
	}
	b.WriteString("</ul></nav></header>\n")
	b.WriteString(`<div class="cookie-banner" id="cookie-consent"><p>` + cookieMarker + ` to improve your experience. <a href="/privacy">Privacy policy</a></p></div>` + "\n")
	b.WriteString(`<main><article class="post"><h1 class="entry-title">` + title + `</h1>` + "\n")
	b.WriteString(`<div class="byline">By Jane Writer</div><div class="entry-content">` + "\n")
	for _, p := range paras {
		b.WriteString("<p>" + p + "</p>\n")
	}
	b.WriteString("</div></article></main>\n")
	b.WriteString(`<aside class="sidebar widget-area"><h2>` + sidebarMarker + `</h2><ul>`)
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, `<li><a href="/story/%d">%s story %d</a></li>`, i, sidebarMarker, i)
	}
	b.WriteString("</ul></aside>\n")
	b.WriteString(`<footer class="site-footer"><p>` + footerMarker + ` 2026. All rights reserved.</p><ul>`)
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, `<li><a href="/about/%d">%s %d</a></li>`, i, footerMarker, i)
	}
	b.WriteString("</ul></footer>\n</body></html>\n")
	return b.String()
}

// benchPage is a ~40 KB realistic page.
func benchPage(seed uint64) string {
	return genPage("A long article about rivers", genParagraphs(seed, 32, 90), pageOpts{padScript: 17000, navLinks: 60})
}

func TestGenPageSize(t *testing.T) {
	p := benchPage(1)
	if len(p) < 36_000 || len(p) > 48_000 {
		t.Fatalf("bench page is %d bytes, want ~40 KB", len(p))
	}
	if os.Getenv("CORPUS_DUMP_PAGE") != "" {
		os.WriteFile(os.Getenv("CORPUS_DUMP_PAGE"), []byte(p), 0o644)
	}
}
