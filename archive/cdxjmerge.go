package archive

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
)

// MergeIndexes writes the CDXJ lines of the WARC files at paths to w as one sorted index. Each
// file's index is read from its index file, or built from the WARC file when it has none (into
// a temporary file, so memory holds one file's lines at most). The sorted per-file indexes are
// then merged line by line (a k-way merge over one buffered reader per file): memory does not
// grow with the crawl. A damaged WARC file without an index is reported to onDamage with its
// Damage (file and offset): the records before the damage are merged, the rest of that file
// is left out, and the other files are merged whole. It returns the number of lines.
func MergeIndexes(w io.Writer, paths []string, onDamage func(path string, err error)) (int64, error) {
	var srcs []*mergeSrc
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	for _, p := range paths {
		s, err := openIndex(p)
		if err != nil {
			var d Damage
			if !errors.As(err, &d) {
				return 0, err
			}
			if onDamage != nil {
				onDamage(p, err)
			}
		}
		srcs = append(srcs, s)
	}
	h := &mergeHeap{}
	for _, s := range srcs {
		if err := s.advance(); err != nil {
			return 0, err
		}
		if s.ok {
			h.items = append(h.items, s)
		}
	}
	heap.Init(h)
	bw := bufio.NewWriterSize(w, 256<<10)
	var n int64
	for h.Len() > 0 {
		s := h.items[0]
		if _, err := bw.WriteString(s.line); err != nil {
			return n, err
		}
		n++
		if err := s.advance(); err != nil {
			return n, err
		}
		if s.ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return n, bw.Flush()
}

// mergeSrc is one sorted index being merged.
type mergeSrc struct {
	path string
	f    *os.File
	tmp  string // temporary file to remove, if the index was built
	r    *bufio.Reader
	line string // current line with its newline
	ok   bool
}

// openIndex opens path's index file, or builds the index into a temporary file. A Damage
// error comes with a source of the lines before the damage.
func openIndex(path string) (*mergeSrc, error) {
	f, err := os.Open(path + IndexSuffix)
	if err == nil {
		return &mergeSrc{path: path, f: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, ioErr("open", path+IndexSuffix, err)
	}
	tf, err := os.CreateTemp("", "crawlnode-*.cdxj")
	if err != nil {
		return nil, ioErr("create temp index for", path, err)
	}
	s := &mergeSrc{path: path, f: tf, tmp: tf.Name()}
	werr := WriteIndex(path, tf)
	var d Damage
	if werr != nil && !errors.As(werr, &d) {
		s.close()
		return nil, werr
	}
	if _, err := tf.Seek(0, io.SeekStart); err != nil {
		s.close()
		return nil, ioErr("seek", s.tmp, err)
	}
	s.r = bufio.NewReaderSize(tf, 64<<10)
	return s, werr
}

func (s *mergeSrc) advance() error {
	line, err := s.r.ReadString('\n')
	if err == io.EOF && line == "" {
		s.ok = false
		return nil
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("read index of %s: %w", s.path, err)
	}
	if line[len(line)-1] != '\n' {
		line += "\n"
	}
	s.line, s.ok = line, true
	return nil
}

func (s *mergeSrc) close() {
	_ = s.f.Close()
	if s.tmp != "" {
		_ = os.Remove(s.tmp)
	}
}

type mergeHeap struct{ items []*mergeSrc }

func (h *mergeHeap) Len() int           { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool { return h.items[i].line < h.items[j].line }
func (h *mergeHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)         { h.items = append(h.items, x.(*mergeSrc)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
