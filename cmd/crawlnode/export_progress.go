package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crawlnode/crawlnode/node"
)

// exportProgress is the one updating line `export --api` draws on a terminal: members
// read, files and bytes copied, records written. Off a terminal it draws nothing. Used
// from one goroutine.
type exportProgress struct {
	out      *os.File
	tty      bool
	last     time.Time
	drawn    bool
	nMembers int
	members  int // read so far
	files    int // copied
	nFiles   int // planned so far
	bytes    int64
	nBytes   int64
	st       *node.ExportStats
}

func newExportProgress(out *os.File) *exportProgress {
	return &exportProgress{out: out, tty: isTerminal(out)}
}

func (p *exportProgress) setMembers(n int) { p.nMembers = n; p.draw(true) }
func (p *exportProgress) addPlanned(files int, b int64) {
	p.nFiles += files
	p.nBytes += b
	p.draw(true)
}
func (p *exportProgress) fileDone()   { p.files++; p.draw(false) }
func (p *exportProgress) memberDone() { p.members++; p.draw(true) }

// Write counts copied bytes (a TeeReader's sink).
func (p *exportProgress) Write(b []byte) (int, error) {
	p.bytes += int64(len(b))
	p.draw(false)
	return len(b), nil
}

// records wraps the output so that writing it redraws the line with st's record count.
func (p *exportProgress) records(w io.Writer, st *node.ExportStats) io.Writer {
	p.st = st
	return progressWriter{w, p}
}

type progressWriter struct {
	w io.Writer
	p *exportProgress
}

func (pw progressWriter) Write(b []byte) (int, error) {
	pw.p.draw(false)
	return pw.w.Write(b)
}

// draw redraws the line, at most every 200 ms unless now.
func (p *exportProgress) draw(now bool) {
	if !p.tty || (!now && time.Since(p.last) < 200*time.Millisecond) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	records := 0
	if p.st != nil {
		records = p.st.Records
	}
	fmt.Fprintf(p.out, "\r\x1b[Kexport: members %d/%d  files %d/%d  %s/%s  records %d",
		p.members, p.nMembers, p.files, p.nFiles, byteSize(p.bytes), byteSize(p.nBytes), records)
}

// end draws the last state and ends the line.
func (p *exportProgress) end() {
	if p.drawn {
		p.draw(true)
		fmt.Fprintln(p.out)
		p.drawn = false
	}
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
