package corpus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/RadhiFadlillah/whatlanggo"

	"github.com/klippa-app/go-pdfium"
	pdfiumerr "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// PDF defaults (PDFConfig).
const (
	DefaultPDFMaxBytes  = 32 << 20
	DefaultPDFMaxPages  = 500
	DefaultPDFTimeout   = 30 * time.Second
	DefaultPDFMaxMemory = 512 << 20
	// pdfMaxTextRunes caps the text taken from one PDF: pages past it are not read.
	pdfMaxTextRunes = 4 << 20
	// pdfReuseMemory: an instance whose WebAssembly memory grew past this is dropped after
	// its document rather than kept for the next (its memory never shrinks).
	pdfReuseMemory = 64 << 20
)

// Rejection reasons of PDFs (Record.Rejected), besides too_large (body above
// PDFConfig.MaxBytes, or the document needed more than PDFConfig.MaxMemory).
const (
	RejectPDFEncrypted    = "pdf_encrypted"      // needs a password, or an unsupported security handler
	RejectPDFBroken       = "pdf_broken"         // not a PDF PDFium can open, or it failed mid-document
	RejectPDFTooManyPages = "pdf_too_many_pages" // more pages than PDFConfig.MaxPages
	RejectPDFTimeout      = "pdf_timeout"        // extraction took longer than PDFConfig.Timeout
	RejectPDFNoTextLayer  = "pdf_no_text_layer"  // no page has text (scans without OCR, pure images)
	RejectPDFDisabled     = "pdf_disabled"       // PDFConfig.Disabled: the PDF is archived, not extracted
)

// PDFConfig bounds the work on one PDF (see the package doc, "PDFs").
type PDFConfig struct {
	// Disabled drops PDFs before their body is read (Rejected "pdf_disabled"), and no PDF
	// engine is ever started. Default false.
	Disabled bool
	// MaxBytes: larger PDFs are rejected ("too_large") without opening them. Default 32 MiB.
	MaxBytes int
	// MaxPages: documents with more pages are rejected ("pdf_too_many_pages") after reading
	// only their page count. Default 500.
	MaxPages int
	// Timeout bounds one document's extraction, open to last page; past it the PDF engine
	// instance is killed and the page rejected ("pdf_timeout"). Default 30s.
	Timeout time.Duration
	// MaxMemory is the WebAssembly memory one PDF engine instance may grow to, in bytes
	// (rounded down to 64 KiB pages); a document that needs more (a decompression bomb, a
	// huge image) fails and is rejected ("too_large"). At most Workers instances exist at
	// once. Default 512 MiB.
	MaxMemory int64
	// CacheDir, when set, keeps PDFium's compiled machine code there, so that a restarted
	// node starts its PDF engine quickly instead of compiling the module again (about 10 s
	// of one core here). Default "": compiled in memory on the first PDF.
	CacheDir string
}

func (c *PDFConfig) setDefaults() {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultPDFMaxBytes
	}
	if c.MaxPages <= 0 {
		c.MaxPages = DefaultPDFMaxPages
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultPDFTimeout
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = DefaultPDFMaxMemory
	}
}

// isPDFType tells a declared PDF (application/pdf, application/x-pdf).
func isPDFType(contentType string) bool {
	mt := mediaType(contentType)
	return mt == "application/pdf" || mt == "application/x-pdf"
}

// mayBePDF tells the declared types a mislabeled PDF is commonly served as: these bodies are
// read back and sniffed (HTML is sniffed anyway). Other types (images, scripts, styles...)
// are dropped on their type alone, so that sniffing costs no WARC read for them.
func mayBePDF(contentType string) bool {
	switch mediaType(contentType) {
	case "application/octet-stream", "binary/octet-stream", "application/download",
		"application/x-download", "application/force-download", "application/unknown",
		"text/plain", "application/acrobat", "applications/pdf":
		return true
	}
	return false
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	}
	return mt
}

// IsPDF tells whether a fetched body is a PDF for the corpus: declared application/pdf, or
// starting with the PDF header whatever its label (the node queues such responses for the
// extract stage although the fetcher does not take them for HTML).
func IsPDF(contentType string, body []byte) bool {
	return isPDFType(contentType) || sniffPDF(body)
}

// sniffPDF tells a PDF by its bytes: the %PDF- header within the first 1024 bytes, where
// readers accept it (PDF 32000-1, annex H.3).
func sniffPDF(body []byte) bool {
	return bytes.Contains(body[:min(len(body), 1024)], []byte("%PDF-"))
}

// pdfEngine owns the PDFium WebAssembly pool. It is built on the first PDF (compiling the
// module costs about 10 s of one core, loading it from CacheDir a quarter of a second), so
// a crawl without PDFs pays nothing. An instance serves document after document (a fresh
// one costs ~20 ms of CPU, more than a small PDF's text), but one that failed, timed out
// or grew past pdfReuseMemory is dropped: a document that broke or exhausted an instance
// leaves nothing behind for the next one, and a big document's memory is returned.
type pdfEngine struct {
	cfg       PDFConfig
	instances int

	mu     sync.Mutex
	pool   pdfium.Pool
	cache  wazero.CompilationCache
	err    error
	closed bool
}

func newPDFEngine(cfg PDFConfig, instances int) *pdfEngine {
	return &pdfEngine{cfg: cfg, instances: max(1, instances)}
}

var errEngineClosed = errors.New("corpus: pdf engine closed")

// engineStart serializes engine starts in a process: with a CacheDir, the first start
// compiles the module and writes the cache, and the others (the nodes of an in-process
// test cluster, a restarted stage) then load it, instead of each compiling at once.
var engineStart sync.Mutex

func (e *pdfEngine) get() (pdfium.Pool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errEngineClosed
	}
	if e.pool != nil || e.err != nil {
		return e.pool, e.err
	}
	rc := wazero.NewRuntimeConfig().
		// The bundled module lowers setjmp/longjmp to exception handling (go-pdfium's default).
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithMemoryLimitPages(uint32(max(16, e.cfg.MaxMemory>>16))).
		// Lets Kill stop a document stuck inside PDFium (the per-document Timeout).
		WithCloseOnContextDone(true)
	if e.cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(e.cfg.CacheDir)
		if err != nil {
			e.err = fmt.Errorf("corpus: pdf engine cache: %w", err)
			return nil, e.err
		}
		e.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	engineStart.Lock()
	defer engineStart.Unlock()
	e.pool, e.err = webassembly.Init(webassembly.Config{
		MinIdle:       0,
		MaxIdle:       e.instances,
		MaxTotal:      e.instances,
		ReuseWorkers:  true,
		RuntimeConfig: rc,
		// No file system: documents are handed over as bytes.
		FSConfig: wazero.NewFSConfig(),
		Stdout:   io.Discard,
		Stderr:   io.Discard,
	})
	if e.err != nil {
		e.err = fmt.Errorf("corpus: start pdf engine: %w", e.err)
	}
	return e.pool, e.err
}

// close releases the pool; PDFs after it are rejected (extract_error).
func (e *pdfEngine) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	var err error
	if e.pool != nil {
		err = e.pool.Close()
		e.pool = nil
	}
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(context.Background()))
		e.cache = nil
	}
	return err
}

// pdfDoc is what one PDF gave.
type pdfDoc struct {
	title string
	pages int
	// read is the number of pages read (fewer than pages when the text cap was reached).
	read  int
	lines []pdfLine
}

// pdfLine is one line of text as PDFium laid it out, with the font size of its first
// character and its position on the page (PDF points, y upwards).
type pdfLine struct {
	text   string
	size   float64
	top    float64
	bottom float64
	page   int
}

// pdfRejection is an extraction failure with its Record reason. trap: the WebAssembly
// module trapped (PDFium aborted, or crashed).
type pdfRejection struct {
	reason, detail string
	trap           bool
}

func (r *pdfRejection) Error() string { return r.reason + ": " + r.detail }

// extract opens body in a fresh instance and reads its title and lines, within the
// configured limits. Errors are *pdfRejection.
func (e *pdfEngine) extract(ctx context.Context, body []byte) (pdfDoc, error) {
	return e.extractWith(ctx, body, nil)
}

// pdfMemReader tells an instance's WebAssembly memory (for the benchmark).
type pdfMemReader struct{ inst pdfium.Pdfium }

func (m pdfMemReader) memory() (uint64, bool) { return instanceMemory(m.inst) }

// extractWith is extract; after, when set, sees the instance once the document is read.
func (e *pdfEngine) extractWith(ctx context.Context, body []byte, after func(pdfMemReader)) (doc pdfDoc, err error) {
	if len(body) > e.cfg.MaxBytes {
		return doc, &pdfRejection{reason: RejectTooLarge, detail: fmt.Sprintf("%d bytes, max %d", len(body), e.cfg.MaxBytes)}
	}
	pool, err := e.get()
	if err != nil {
		return doc, &pdfRejection{reason: RejectExtractFailed, detail: err.Error()}
	}
	// Workers+1 instances: a worker finds one free; Stage.Page calls beyond that wait, at
	// most Timeout.
	wctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	inst, err := pool.GetInstanceWithContext(wctx)
	cancel()
	if err != nil {
		return doc, &pdfRejection{reason: RejectExtractFailed, detail: "pdf engine: " + err.Error()}
	}
	// The watchdog kills the instance at the deadline; whoever comes second of the
	// watchdog and the end of extraction does nothing.
	var once sync.Once
	finish := func(kill bool) {
		once.Do(func() {
			if kill {
				_ = inst.Kill()
			} else {
				_ = inst.Close()
			}
		})
	}
	timer := time.AfterFunc(e.cfg.Timeout, func() { finish(true) })
	defer func() {
		p := recover()
		if !timer.Stop() {
			// The watchdog fired (and killed the instance, or is killing it: once waits).
			finish(true)
			err = &pdfRejection{reason: RejectPDFTimeout, detail: fmt.Sprintf("over %s", e.cfg.Timeout)}
			return
		}
		if p != nil {
			finish(true)
			err = &pdfRejection{reason: RejectPDFBroken, detail: fmt.Sprintf("pdf engine panic: %v", p)}
			return
		}
		// An instance that failed is not trusted again (it is killed, not returned), nor
		// kept with a big document's memory.
		size, ok := instanceMemory(inst)
		finish(err != nil || !ok || size > pdfReuseMemory)
	}()
	doc, err = readPDF(inst, body, e.cfg.MaxPages)
	if after != nil {
		after(pdfMemReader{inst})
	}
	var r *pdfRejection
	if errors.As(err, &r) && r.trap {
		// PDFium aborts (a trap) when malloc fails; tell that from other traps by the
		// instance's memory, which a failed allocation left near the limit.
		if size, ok := instanceMemory(inst); ok && int64(size) > e.cfg.MaxMemory-e.cfg.MaxMemory/8 {
			r.reason = RejectTooLarge
			r.detail = fmt.Sprintf("pdf engine memory limit %d MiB reached: %s", e.cfg.MaxMemory>>20, firstLine(r.detail))
		}
	}
	return doc, err
}

// instanceMemory returns the WebAssembly memory size of a go-pdfium instance, read with
// reflection through its implementation's exported Module field: go-pdfium has no API for
// it. ok is false where that shape is not found (another go-pdfium version).
func instanceMemory(inst pdfium.Pdfium) (size uint64, ok bool) {
	defer func() {
		if recover() != nil {
			size, ok = 0, false
		}
	}()
	v := reflect.ValueOf(inst.GetImplementation())
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	mod := v.FieldByName("Module")
	if !mod.IsValid() || mod.IsNil() {
		return 0, false
	}
	mem := mod.MethodByName("Memory").Call(nil)[0]
	return mem.MethodByName("Size").Call(nil)[0].Uint(), true
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// readPDF does the PDFium calls for extract.
func readPDF(inst pdfium.Pdfium, body []byte, maxPages int) (pdfDoc, error) {
	var doc pdfDoc
	opened, err := inst.OpenDocument(&requests.OpenDocument{File: &body})
	if err != nil {
		return doc, openRejection(err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: opened.Document})
	pc, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: opened.Document})
	if err != nil {
		return doc, callRejection(err)
	}
	doc.pages = pc.PageCount
	if doc.pages > maxPages {
		return doc, &pdfRejection{reason: RejectPDFTooManyPages, detail: fmt.Sprintf("%d pages, max %d", doc.pages, maxPages)}
	}
	if t, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: opened.Document, Tag: "Title"}); err == nil {
		doc.title = strings.Join(strings.Fields(t.Value), " ")
	}
	runes := 0
	for i := 0; i < doc.pages && runes < pdfMaxTextRunes; i++ {
		lines, n, err := readPage(inst, opened.Document, i)
		if err != nil {
			return doc, callRejection(err)
		}
		doc.lines = append(doc.lines, lines...)
		doc.read++
		runes += n
	}
	return doc, nil
}

// openRejection classifies an OpenDocument failure.
func openRejection(err error) error {
	switch {
	case errors.Is(err, pdfiumerr.ErrPassword), errors.Is(err, pdfiumerr.ErrSecurity):
		return &pdfRejection{reason: RejectPDFEncrypted, detail: err.Error()}
	case errors.Is(err, pdfiumerr.ErrFormat), errors.Is(err, pdfiumerr.ErrFile), errors.Is(err, pdfiumerr.ErrUnknown):
		return &pdfRejection{reason: RejectPDFBroken, detail: err.Error()}
	}
	return callRejection(err)
}

// callRejection is a failure of a PDFium call: "broken", and marked as a trap when the
// module trapped (extract tells memory exhaustion from the rest).
func callRejection(err error) error {
	msg := err.Error()
	return &pdfRejection{reason: RejectPDFBroken, detail: msg, trap: strings.Contains(msg, "wasm error")}
}

// readPage returns page i's lines, and its number of characters.
func readPage(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, i int) ([]pdfLine, int, error) {
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{
		Page: requests.Page{ByIndex: &requests.PageByIndex{Document: doc, Index: i}},
	})
	if err != nil {
		return nil, 0, err
	}
	defer inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
	cc, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil || cc.Count <= 0 {
		return nil, 0, err
	}
	txt, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, StartIndex: 0, Count: cc.Count})
	if err != nil {
		return nil, 0, err
	}
	var lines []pdfLine
	for _, l := range splitPDFLines(txt.Text) {
		line := pdfLine{text: l.text, page: i}
		if fs, err := inst.FPDFText_GetFontSize(&requests.FPDFText_GetFontSize{TextPage: tp.TextPage, Index: l.first}); err == nil {
			line.size = fs.FontSize
		}
		if box, err := inst.FPDFText_GetCharBox(&requests.FPDFText_GetCharBox{TextPage: tp.TextPage, Index: l.first}); err == nil {
			line.top, line.bottom = box.Top, box.Bottom
		}
		lines = append(lines, line)
	}
	return lines, cc.Count, nil
}

// rawLine is a line of a page's text and the character index of its first non-space
// character.
type rawLine struct {
	text  string
	first int
}

// splitPDFLines splits FPDFText_GetText's text (one code point per character index; the
// UTF-16 surrogate pairs are decoded already) into trimmed non-empty lines, keeping the
// character index where each starts. PDFium separates lines with "\r\n" (characters it
// generated, with their own indices) and marks a hyphen it found at a line end as U+0002.
func splitPDFLines(text string) []rawLine {
	var out []rawLine
	var b strings.Builder
	first := -1
	idx := 0
	flush := func() {
		if s := strings.TrimSpace(b.String()); s != "" {
			out = append(out, rawLine{text: s, first: first})
		}
		b.Reset()
		first = -1
	}
	for _, r := range text {
		switch {
		case r == '\r' || r == '\n':
			flush()
		case r == 2: // a hyphen PDFium found at the end of a line: kept for pdfLayout
			b.WriteRune(r)
		case r == 0 || r == 0xfffe || r == 0xffff:
		default:
			if first < 0 && !isSpaceRune(r) {
				first = idx
			}
			b.WriteRune(r)
		}
		idx++
	}
	flush()
	return out
}

func isSpaceRune(r rune) bool {
	return r == ' ' || r == '\t' || r == 0xa0 || r == 0x3000
}

// runPDF is run for a PDF: text, Markdown, title and language from the document, then the
// filters that apply to text (length, language; link density and boilerplate share are
// HTML facts and stay 0).
func (e *extractor) runPDF(j *Job, body []byte, rec Record) analysis {
	a := analysis{}
	reject := func(reason, detail string) analysis {
		rec.Rejected, rec.RejectDetail = reason, detail
		rec.Text, rec.Markdown = "", ""
		a.rec = rec
		return a
	}
	doc, err := e.pdf.extract(context.Background(), body)
	rec.PDFPages = doc.pages
	if err != nil {
		var r *pdfRejection
		if errors.As(err, &r) {
			return reject(r.reason, r.detail)
		}
		return reject(RejectExtractFailed, err.Error())
	}
	lay := pdfLayout(doc.lines)
	rec.Title = doc.title
	if rec.Title == "" || fileNameTitle(rec.Title) {
		rec.Title = lay.heading
	}
	text := lay.text
	if rec.Title == "" && len(doc.lines) > 0 {
		rec.Title = doc.lines[0].text
	}
	if text == "" {
		return reject(RejectPDFNoTextLayer, fmt.Sprintf("%d pages", doc.pages))
	}
	rec.Language = detectLanguage(text)
	normalized := NormalizeText(text)
	rec.Quality.TextLength = utf8.RuneCountInString(text)
	if normalized != "" {
		rec.Quality.Words = strings.Count(normalized, " ") + 1
	}
	rec.Quality.VisibleChars = countNonSpace(text)
	if normalized == "" {
		return reject(RejectPDFNoTextLayer, "only white space")
	}
	a.hasText, a.mainChars = true, rec.Quality.VisibleChars
	a.simhash = SimHash(text)
	rec.SimHash = fmt.Sprintf("%016x", a.simhash)
	sum := sha256.Sum256([]byte(normalized))
	rec.ContentHash = hex.EncodeToString(sum[:])
	a.hashBytes = sum[:]
	switch {
	case rec.Quality.TextLength < e.filters.MinTextLength:
		return reject(RejectTooShort, strconv.Itoa(rec.Quality.TextLength))
	case len(e.filters.Languages) > 0 && !slices.Contains(e.filters.Languages, rec.Language):
		return reject(RejectLanguage, rec.Language)
	}
	rec.Text = text
	if e.md != nil {
		rec.Markdown = lay.markdown
	}
	a.rec = rec
	return a
}

// detectLanguage is the HTML path's detector (whatlanggo, as go-trafilatura calls it) on
// the first 64 KiB of the text: enough for a confident answer, bounded for long documents.
func detectLanguage(text string) string {
	if len(text) > 64<<10 {
		cut := 64 << 10
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return normalizeLang(whatlanggo.DetectLang(text).Iso6391())
}

// fileNameTitle tells document-info titles that name a file or say nothing, as word
// processors and converters leave them ("Microsoft Word - report.docx", "untitled").
func fileNameTitle(t string) bool {
	l := strings.ToLower(t)
	if l == "untitled" || strings.HasPrefix(l, "microsoft word - ") || strings.HasPrefix(l, "microsoft powerpoint - ") {
		return true
	}
	for _, ext := range []string{".doc", ".docx", ".dvi", ".pdf", ".tex", ".odt", ".ppt", ".pptx", ".indd", ".rtf", ".xls", ".xlsx"} {
		if strings.HasSuffix(l, ext) {
			return true
		}
	}
	return false
}
