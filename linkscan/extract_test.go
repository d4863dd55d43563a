package linkscan

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/net/html"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseLinks(t *testing.T) {
	cases := []struct {
		name string
		html string
		want []Link
	}{
		{"anchor", `<a href="/x">x</a>`, []Link{{URL: "/x", Kind: Anchor}}},
		{"area", `<map><area shape=rect href="/m"></map>`, []Link{{URL: "/m", Kind: Area}}},
		{"frame", `<frameset><frame src="f.html"></frameset>`, []Link{{URL: "f.html", Kind: Frame}}},
		{"iframe", `<iframe src="//h.sim.test/i"></iframe>`, []Link{{URL: "//h.sim.test/i", Kind: IFrame}}},
		{"canonical", `<head><link rel="canonical" href="https://h.sim.test/c"></head>`,
			[]Link{{URL: "https://h.sim.test/c", Kind: Canonical}}},
		{"canonical case and list", `<link REL="Alternate CANONICAL" HREF=/c>`, []Link{{URL: "/c", Kind: Canonical}}},
		{"other link rels ignored", `<link rel=stylesheet href=/s.css><link rel=alternate href=/feed><link href=/x>`, nil},
		{"nofollow", `<a rel=nofollow href=/a>a</a>`, []Link{{URL: "/a", Kind: Anchor, NoFollow: true}}},
		{"nofollow in list", `<a href="/a" rel="external NoFollow">a</a>`, []Link{{URL: "/a", Kind: Anchor, NoFollow: true}}},
		{"nofollow substring is not nofollow", `<a href="/a" rel="nofollowme">a</a>`, []Link{{URL: "/a", Kind: Anchor}}},
		{"area nofollow", `<area href=/a rel=nofollow>`, []Link{{URL: "/a", Kind: Area, NoFollow: true}}},
		{"fragment and protocol-relative kept raw", `<a href="#top">t</a><a href="//o.sim.test/p#f">o</a>`,
			[]Link{{URL: "#top", Kind: Anchor}, {URL: "//o.sim.test/p#f", Kind: Anchor}}},
		{"entities decoded", `<a href="/q?a=1&amp;b=2">q</a>`, []Link{{URL: "/q?a=1&b=2", Kind: Anchor}}},
		{"unquoted and upper-case", `<A HREF=/u/v?x=1>u</A>`, []Link{{URL: "/u/v?x=1", Kind: Anchor}}},
		{"single quotes", `<a href='/s'>s</a>`, []Link{{URL: "/s", Kind: Anchor}}},
		{"first href wins", `<a href=/1 href=/2>x</a>`, []Link{{URL: "/1", Kind: Anchor}}},
		{"anchor without href", `<a name=x>x</a><a>y</a>`, nil},
		{"empty href kept", `<a href="">self</a>`, []Link{{URL: "", Kind: Anchor}}},
		{"script content is not markup", `<script>document.write('<a href="/bad">')</script><a href=/good>g</a>`,
			[]Link{{URL: "/good", Kind: Anchor}}},
		{"style content is not markup", `<style>/* <a href="/bad"> */</style>`, nil},
		{"textarea content is not markup", `<textarea><a href="/bad"></textarea>`, nil},
		{"comment is not markup", `<!-- <a href="/bad"> -->`, nil},
		{"noscript is markup", `<noscript><a href="/ns">n</a></noscript>`, []Link{{URL: "/ns", Kind: Anchor}}},
		{"unclosed tags", `<div><p><a href=/1>one<a href=/2>two<ul><li><a href=/3`,
			[]Link{{URL: "/1", Kind: Anchor}, {URL: "/2", Kind: Anchor}}},
		{"garbage bytes", "\x00\xff<a href=\"/g\xfe\">\x00<<<>>>&&&;<a href=/h>",
			[]Link{{URL: "/g\xfe", Kind: Anchor}, {URL: "/h", Kind: Anchor}}},
		{"self-closing", `<a href="/sc"/>`, []Link{{URL: "/sc", Kind: Anchor}}},
		{"javascript kept raw", `<a href="javascript:void(0)">j</a>`, []Link{{URL: "javascript:void(0)", Kind: Anchor}}},
		{"giant href skipped", `<a href="data:` + strings.Repeat("A", 20000) + `">d</a><a href=/ok>`,
			[]Link{{URL: "/ok", Kind: Anchor}}},
	}
	var p Page
	for _, tc := range cases {
		Parse([]byte(tc.html), &p)
		if len(p.Links) == 0 && len(tc.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(p.Links, tc.want) {
			t.Errorf("%s: links %+v, want %+v", tc.name, p.Links, tc.want)
		}
	}
}

func TestParsePageFields(t *testing.T) {
	html := `<!doctype html><html><head>
<base href="/sub/dir/">
<base href="/ignored/">
<title>  Hello
   &amp; welcome </title>
<meta name="tdm-reservation" content=" 1 ">
<meta name="tdm-policy" content="https://h.sim.test/policy.json">
<link rel=canonical href="/canon">
<link rel=canonical href="/second">
</head><body><svg><title>svg title</title></svg><title>late</title></body></html>`
	var p Page
	Parse([]byte(html), &p)
	if p.Base != "/sub/dir/" {
		t.Errorf("Base %q", p.Base)
	}
	if p.Title != "Hello & welcome" {
		t.Errorf("Title %q", p.Title)
	}
	if !p.TDMReservation || p.TDMPolicy != "https://h.sim.test/policy.json" {
		t.Errorf("TDM %v %q", p.TDMReservation, p.TDMPolicy)
	}
	if p.Canonical != "/canon" {
		t.Errorf("Canonical %q", p.Canonical)
	}
	if p.MetaNoFollow || p.MetaNoIndex || p.MetaNoAI || p.MetaNoImageAI {
		t.Errorf("robots flags set: %+v", p)
	}

	// Reuse resets every field and keeps the slice's memory.
	links := p.Links[:cap(p.Links)]
	Parse([]byte(`<a href=/x>`), &p)
	if p.Base != "" || p.Title != "" || p.TDMReservation || p.TDMPolicy != "" || p.Canonical != "" || len(p.Links) != 1 {
		t.Errorf("not reset: %+v", p)
	}
	if &links[0] != &p.Links[0] {
		t.Error("Links slice not reused")
	}

	// Title edge cases.
	for in, want := range map[string]string{
		`<title></title><title>x</title>`:                   "",
		`<title>a` + strings.Repeat("é", 2000) + `</title>`: "a" + strings.Repeat("é", (MaxTitleBytes-1)/2),
		`<TITLE>Up</TITLE>`:                                 "Up",
		`<title>unclosed`:                                   "unclosed",
	} {
		Parse([]byte(in), &p)
		if p.Title != want {
			t.Errorf("%.40q: title %.40q, want %.40q", in, p.Title, want)
		}
	}

	// tdm-reservation must be exactly 1.
	Parse([]byte(`<meta name=tdm-reservation content=0>`), &p)
	if p.TDMReservation {
		t.Error("tdm-reservation 0 read as reserved")
	}
}

func TestParseMetaRobots(t *testing.T) {
	type flags struct{ noIndex, noFollow, noAI, noImageAI bool }
	cases := []struct {
		html string
		want flags
	}{
		{`<meta name="robots" content="noindex, nofollow">`, flags{true, true, false, false}},
		{`<meta name="ROBOTS" content="NOINDEX">`, flags{true, false, false, false}},
		{`<meta name="robots" content="none">`, flags{true, true, false, false}},
		{`<meta name=robots content="noindex,nofollow,noai,noimageai">`, flags{true, true, true, true}},
		{`<meta name=robots content="noindex nofollow">`, flags{true, true, false, false}},
		{`<meta name=crawlnode content="nofollow">`, flags{false, true, false, false}},
		{`<meta name=CrawlNode content="noai">`, flags{false, false, true, false}},
		{`<meta name=googlebot content="noindex, nofollow">`, flags{}},
		{`<meta name=robots content="index, follow, all">`, flags{}},
		{`<meta name=robots content="">`, flags{}},
		{`<meta name=robots>`, flags{}},
		{`<meta content="noindex" name=" robots ">`, flags{true, false, false, false}},
		{`<meta name=robots content=noindex><meta name=crawlnode content=nofollow>`, flags{true, true, false, false}},
		{`<meta name=description content="noindex nofollow">`, flags{}},
		{`<meta name=robots content="nofollowing, noindexed">`, flags{}},
		{`<body><meta name=robots content=nofollow></body>`, flags{false, true, false, false}},
	}
	var p Page
	for _, tc := range cases {
		Parse([]byte(tc.html), &p)
		got := flags{p.MetaNoIndex, p.MetaNoFollow, p.MetaNoAI, p.MetaNoImageAI}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.html, got, tc.want)
		}
	}
}

func TestParseMaxLinks(t *testing.T) {
	var b strings.Builder
	for i := 0; i < MaxLinks+500; i++ {
		b.WriteString(`<a href="/l">x</a>`)
	}
	b.WriteString(`<meta name=robots content=nofollow>`)
	var p Page
	Parse([]byte(b.String()), &p)
	if len(p.Links) != MaxLinks {
		t.Fatalf("%d links, want %d", len(p.Links), MaxLinks)
	}
	if p.MetaNoFollow {
		t.Error("read past MaxLinks")
	}
}

type resolved struct {
	URL  string
	Kind LinkKind
}

func resolveAll(p *Page, pageURL string) []resolved {
	var out []resolved
	p.Resolve(pageURL, func(c string, l Link) { out = append(out, resolved{c, l.Kind}) })
	return out
}

func TestResolve(t *testing.T) {
	const pageURL = "http://h1.sim.test/a/b.html"
	cases := []struct {
		name string
		html string
		want []resolved
	}{
		{"relative, fragment, protocol-relative",
			`<a href="c.html#x">1</a><a href="//h2.sim.test/p?b=1&amp;a=2">2</a><a href="#top">3</a>`,
			[]resolved{{"http://h1.sim.test/a/c.html", Anchor}, {"http://h2.sim.test/p?a=2&b=1", Anchor},
				{"http://h1.sim.test/a/b.html", Anchor}}},
		{"dedup within page",
			`<a href="/x">1</a><a href="/x#f">2</a><a href="http://H1.SIM.TEST/x?utm_source=y">3</a><area href=/x>`,
			[]resolved{{"http://h1.sim.test/x", Anchor}}},
		{"dropped schemes",
			`<a href="mailto:a@b">m</a><a href="javascript:go()">j</a><a href="data:,x">d</a><a href="http://[bad/">b</a><a href=/ok>`,
			[]resolved{{"http://h1.sim.test/ok", Anchor}}},
		{"nofollow skipped",
			`<a href=/f>f</a><a rel="external nofollow" href=/nf>nf</a>`,
			[]resolved{{"http://h1.sim.test/f", Anchor}}},
		{"meta nofollow keeps only canonical",
			`<meta name=robots content=nofollow><link rel=canonical href=/canon><a href=/x>x</a><iframe src=/i></iframe>`,
			[]resolved{{"http://h1.sim.test/canon", Canonical}}},
		{"absolute base",
			`<base href="https://h3.sim.test/base/"><a href="x">x</a><a href="/y">y</a>`,
			[]resolved{{"https://h3.sim.test/base/x", Anchor}, {"https://h3.sim.test/y", Anchor}}},
		{"relative base",
			`<base href="../other/"><a href="x">x</a>`,
			[]resolved{{"http://h1.sim.test/other/x", Anchor}}},
		{"invalid base falls back to page URL",
			`<base href="http://[::1"><a href="x">x</a>`,
			[]resolved{{"http://h1.sim.test/a/x", Anchor}}},
		{"javascript base falls back to page URL",
			`<base href="javascript:void(0)"><a href="x">x</a>`,
			[]resolved{{"http://h1.sim.test/a/x", Anchor}}},
		{"all kinds",
			`<frameset><frame src=f1></frameset><iframe src=i1></iframe><map><area href=a1></map><a href=a2>`,
			[]resolved{{"http://h1.sim.test/a/f1", Frame}, {"http://h1.sim.test/a/i1", IFrame},
				{"http://h1.sim.test/a/a1", Area}, {"http://h1.sim.test/a/a2", Anchor}}},
	}
	var p Page
	for _, tc := range cases {
		Parse([]byte(tc.html), &p)
		got := resolveAll(&p, pageURL)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
	// A second Resolve on the same page starts a fresh dedup set.
	Parse([]byte(`<a href=/x>`), &p)
	if n := len(resolveAll(&p, pageURL)) + len(resolveAll(&p, pageURL)); n != 2 {
		t.Errorf("second Resolve found %d links in total, want 2", n)
	}
	// An invalid page URL resolves nothing.
	if got := resolveAll(&p, "mailto:x@y"); len(got) != 0 {
		t.Errorf("invalid page URL gave %v", got)
	}
}

func TestHeaderSignals(t *testing.T) {
	type sig struct{ noIndex, noFollow, noAI, tdm bool }
	cases := []struct {
		xrt  []string
		tdm  string
		want sig
	}{
		{nil, "", sig{}},
		{[]string{"noindex, nofollow"}, "", sig{true, true, false, false}},
		{[]string{"noindex", "nofollow"}, "", sig{true, true, false, false}},
		{[]string{"NONE"}, "", sig{true, true, false, false}},
		{[]string{"noai"}, "", sig{false, false, true, false}},
		{[]string{"noimageai"}, "", sig{}},
		{[]string{"crawlnode: noindex"}, "", sig{true, false, false, false}},
		{[]string{"CrawlNode:nofollow, noindex"}, "", sig{true, true, false, false}},
		{[]string{"googlebot: noindex, nofollow"}, "", sig{}},
		{[]string{"googlebot: noindex", "nofollow"}, "", sig{false, true, false, false}},
		{[]string{"noai, googlebot: noindex"}, "", sig{false, false, true, false}},
		{[]string{"unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"}, "", sig{true, false, false, false}},
		{[]string{"max-snippet: -1, nofollow"}, "", sig{false, true, false, false}},
		{[]string{"all"}, "1", sig{false, false, false, true}},
		{nil, " 1 ", sig{false, false, false, true}},
		{nil, "0", sig{}},
		{nil, "true", sig{}},
	}
	for _, tc := range cases {
		ni, nf, na, td := HeaderSignals(tc.xrt, tc.tdm)
		if got := (sig{ni, nf, na, td}); got != tc.want {
			t.Errorf("%q %q: %+v, want %+v", tc.xrt, tc.tdm, got, tc.want)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	body := []byte(genPage(150))
	var p Page
	Parse(body, &p)
	// Parse's fast path reads the body in place: one string per link, and a
	// copy of values with a character reference (about 20% of this page's
	// links). Anything per tag would blow the limit: the page has some 700.
	n := testing.AllocsPerRun(20, func() { Parse(body, &p) })
	if limit := 2*float64(len(p.Links)) + 10; n > limit {
		t.Errorf("Parse: %v allocs for %d links, want <= %v", n, len(p.Links), limit)
	}
	// The tokenizer path: the tokenizer alone allocates a key string per
	// attribute of every tag (inside Next); parseTokens adds as much as scan.
	n = testing.AllocsPerRun(20, func() { p = Page{Links: p.Links[:0]}; parseTokens(body, &p) })
	base := testing.AllocsPerRun(20, func() {
		z := html.NewTokenizer(bytes.NewReader(body))
		for z.Next() != html.ErrorToken {
		}
	})
	if limit := base + 2*float64(len(p.Links)) + 10; n > limit {
		t.Errorf("parseTokens: %v allocs for %d links, tokenizer alone %v, want <= %v", n, len(p.Links), base, limit)
	}
}

func TestAttrsMatchTokenizer(t *testing.T) {
	for _, s := range []string{
		`<a href=/x>`, `<a =x href=y>`, `<a href = "y" / rel=nofollow>`, `<a/href=/x/>`, `<a href>`,
		`<a href= >`, `<a HREF='x' href=y>`, `<a href="x"rel="nofollow">`, `<a href='a"b' rel=a'b>`,
		`<a href="unterminated`, `<a title=>x</a>`, `<a href=x/ rel=y/>`, `<a	href=x	rel=y>`,
		`<A HREF=/u/v?x=1>`, `<a href=a=b=c>`, `<a href="?a=1&copy=2&lang&amp;x&ampy&amp=&#65;&#x42&#;&#xZ&&;&Amp;&notit;&notin;">`,
		`<a href="&semi;&#0;&#x80;&#99999999;&#xD800;&lt&gt;x&quot">`, `<a title="&" href=&amp>`, `<a ==x>`, `<a //href=x>`, `<meta name=robots content= noindex >`,
	} {
		checkAttrs(t, []byte(s))
	}
	// And the values Parse reads from such tags.
	var p Page
	Parse([]byte(`<a href="x"rel="nofollow"><a/href=/y/><a href=a=b=c rel=Nofollow/>`), &p)
	want := []Link{{URL: "x", Kind: Anchor, NoFollow: true}, {URL: "/y/", Kind: Anchor}, {URL: "a=b=c", Kind: Anchor, NoFollow: false}}
	if !reflect.DeepEqual(p.Links, want) {
		t.Errorf("links %+v, want %+v", p.Links, want)
	}
}

// TestScanMatchesTokenizer runs the fast path and the tokenizer over markup
// that exercises every token boundary scan reproduces, every prefix of it (so
// each construct is also cut by the end of the body) and pairs of it.
func TestScanMatchesTokenizer(t *testing.T) {
	cases := []string{
		`<a href=/x>x</a>`, `<A HREF="/y" REL="NoFollow">`, `<a title=">" href=/q>`, `<a title='<a href=/no>' href=/yes>`,
		`<a href=/u/>`, `<a/href=/v>`, `<a =x href=y>`, `<a href = "z" / rel=nofollow>`, `<a href=a=b=c>`, `<a href="&amp;&lt;&copy;&notin;">`,
		`<area href=/ar>`, `<frame src=/fr>`, `<iframe src=/if><a href=/in-iframe></iframe><a href=/after-iframe>`,
		`<link rel="Canonical stylesheet" href=/c1><link rel=canonical href=/c2>`, `<base href="/b/"><base href=/b2/>`,
		`<meta name=ROBOTS content="noindex, NoFollow"><meta name=crawlnode content=noai><meta name=tdm-reservation content=" 1 ">`,
		`<meta name="tdm-policy" content=" https://p/ ">`, `<meta content=none name=robots>`,
		`<title> A  &amp; B </title><title>second</title>`, `<title></title><title>x</title>`, "<title>a\r\nb\rc\x00d</title>",
		`<svg><title>icon</title></svg><title>page</title>`, `<svg/><title>t</title>`, `<svg><svg></svg></svg><title>t2</title>`, `</svg><title>t3</title>`,
		`<TITLE>up</TITLE >`, `<title/>raw <a href=/t></title><a href=/t2>`, `<title>x</titlex><a href=/no></title/>`,
		`<script>var s = "<a href='/no'>"; if (a</b) {}</script><a href=/s>`, `<SCRIPT type=x>"</SCRIPTx>"<a href=/no></script ><a href=/s2>`,
		`<script>document.write("<!-- <a href=/esc> -->")</script><a href=/after>`, `<script/><a href=/no></script><a href=/yes>`,
		`<style>a{content:"</a>"}<a href=/no></style><a href=/st>`, `<textarea><a href=/no></textarea><a href=/ta>`, `<xmp><a href=/no></xmp>`,
		`<noscript><a href=/ns></noscript>`, `<noscript/><a href=/no></noscript><a href=/ns2>`, `<noframes><a href=/nf></noframes>`, `<noembed><a href=/ne></noembed>`,
		`<plaintext><a href=/no>`, `<!-- <a href=/no> --><a href=/c>`, `<!--><a href=/c2>`, `<!---><a href=/c3>`, `<!-- x --!><a href=/c4>`,
		`<!-- a --!- b --><a href=/c5>`, `<!-- -- ><a href=/no> --><a href=/c6>`, `<!----!x><a href=/no>--><a href=/c7>`, `<!-x><a href=/c8>`,
		`<!DOCTYPE html><a href=/d>`, `<![CDATA[<a href=/cd>]]><a href=/cd2>`, `<?xml version="1.0"?><a href=/pi>`, `<!><a href=/e>`,
		`</><a href=/f>`, `</ a href=/no><a href=/g>`, `</a title=">"><a href=/h>`, `</1><a href=/i>`, `<<a href=/j>`, `< a href=/no>`, `<1><a href=/k>`,
		"<a\thref=/l\trel=nofollow\f>", `<a href='x"y'>`, `<a href=x rel=nofollow rel=other>`, `<a rel=nofollow href=a href=b>`,
		"<a href=\"/nul\x00\">", "<a\rhref=/cr>", "<p title=\"\x00\"><a href=/ok>",
		`<script><!--<script>x</script>--><a href=/no></script><a href=/de>`, `<script><!-- </script><a href=/e1>`,
		`<script><!--<SCRIPT x></SCRIPT >--!></script><a href=/e2>`, `<script><!-<!--</script-x></script><a href=/e3>`,
		`<script><!--<scripty></script><a href=/e4>`, `<script><!--<script/>--></script><a href=/e5>`, `<script><!-- -<a>- --></script><a href=/e6>`,
		`<script><!--<script>--<</script>--></script><a href=/e7>`, `<script><!--<1 --></script><a href=/e8>`, `<script>a<</script><a href=/e9>`, `<script><!<!--</script><a href=/e10>`, `<script><!-</script><a href=/e11>`, `<script><!-- -><script></script><a href=/m1>--></script><a href=/m2>`,
		`<script><!--><script></script><a href=/m3></script><a href=/m4>`, `<script><!--<script> -></script><a href=/m5>--></script><a href=/m6>`,
		`<script><!--<script>--><script></script><a href=/dd>--></script><a href=/e12>`,
		`<!--x--!--><a href=/c9>-->`, `<!--x--!-x--><a href=/c10>`,
		"<a href=\"/a\r\nb\rc&amp;\">", "<title>x\r\n&amp;\r</title>", "<meta name=robots\r\ncontent=\"noindex\r\nnofollow\">",
	}
	check := func(body string) {
		t.Helper()
		checkScan(t, []byte(body))
	}
	for _, c := range cases {
		for n := 0; n <= len(c); n++ {
			check(c[:n])
		}
		for _, d := range cases {
			check(c + d)
		}
	}
	// Where scan declines, the tokenizer decides; where it must not decline,
	// it does not (a fast path that always declined would pass the above).
	for body, want := range map[string]bool{
		`<script>document.write("<!-- <a href=/esc> -->")</script>`: true,
		"<a href=\"/nul\x00\">":                    false,
		"<a\rhref=/cr>":                            true,
		"<p title=\"\x00\"><a href=/ok>":           true,
		genPage(150):                               true,
		`<script>if (a<!b) {}</script><a href=/x>`: true,
	} {
		var p Page
		if got := scan([]byte(body), &p); got != want {
			t.Errorf("scan(%.60q) accepted %v, want %v", body, got, want)
		}
	}
}

// TestScanRealPages holds the fast path against the tokenizer on the
// real-world pages go-trafilatura ships for its own comparison benchmark
// (about 1,100 pages from news sites, blogs and forums; the module is a
// dependency, so its files are in the module cache wherever this builds).
func TestScanRealPages(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/markusmobius/go-trafilatura").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "test-files", "*", "*.html"))
	if len(files) < 500 {
		t.Fatalf("found %d real pages under %s, want the module's test files", len(files), out)
	}
	accepted, links := 0, 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if checkScan(t, body) {
			accepted++
		}
		var p Page
		Parse(body, &p)
		links += len(p.Links)
	}
	t.Logf("%d real pages, %d read by the fast path, %d links", len(files), accepted, links)
	// Old pages escape their scripts with "<!--"; most pages must not need the tokenizer.
	if accepted < len(files)*3/4 {
		t.Errorf("the fast path read %d of %d pages", accepted, len(files))
	}
}
