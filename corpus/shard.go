package corpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	shardExt     = ".jsonl.zst"
	partialExt   = ".partial"
	recoverExt   = ".recover"
	maxLineBytes = 64 << 20
)

// ShardName is the file name of a finished shard.
func ShardName(node string, seq int) string {
	return fmt.Sprintf("corpus-%s-%06d%s", node, seq, shardExt)
}

// parseShardName returns node, seq and whether name is a finished (false) or .partial (true)
// shard; ok is false for other files.
func parseShardName(name string) (node string, seq int, partial, ok bool) {
	if strings.HasSuffix(name, partialExt) {
		partial = true
		name = strings.TrimSuffix(name, partialExt)
	}
	if !strings.HasPrefix(name, "corpus-") || !strings.HasSuffix(name, shardExt) {
		return "", 0, false, false
	}
	core := strings.TrimSuffix(strings.TrimPrefix(name, "corpus-"), shardExt)
	i := strings.LastIndexByte(core, '-')
	if i <= 0 {
		return "", 0, false, false
	}
	n, err := strconv.Atoi(core[i+1:])
	if err != nil || n < 0 {
		return "", 0, false, false
	}
	return core[:i], n, partial, true
}

// shardWriter appends JSON lines to one zstd-compressed shard file named *.partial while open.
type shardWriter struct {
	path   string // final path
	f      *os.File
	out    *countWriter // f, counting the compressed bytes
	enc    *zstd.Encoder
	bytes  int64 // uncompressed bytes written
	lines  int
	opened time.Time
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// DurableShard is the open shard's flushed part: its file name (NAME.jsonl.zst.partial) and
// the bytes of it that hold complete zstd blocks of complete lines, fsynced.
type DurableShard struct {
	Name string
	Size int64
}

func newEncoder(w io.Writer) (*zstd.Encoder, error) {
	// One goroutine per encoder: the stage has one open shard and the extract workers own the cores.
	return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
}

func openShard(dir, node string, seq int, now time.Time) (*shardWriter, error) {
	final := filepath.Join(dir, ShardName(node, seq))
	f, err := os.OpenFile(final+partialExt, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("corpus: open shard: %w", err)
	}
	out := &countWriter{w: f}
	enc, err := newEncoder(out)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("corpus: open shard: %w", err)
	}
	return &shardWriter{path: final, f: f, out: out, enc: enc, opened: now}, nil
}

func (s *shardWriter) write(line []byte) error {
	if _, err := s.enc.Write(line); err != nil {
		return fmt.Errorf("corpus: write shard: %w", err)
	}
	s.bytes += int64(len(line))
	s.lines++
	return nil
}

// flush makes every line written so far durable: a complete zstd block, then fsync.
func (s *shardWriter) flush() error {
	if err := s.enc.Flush(); err != nil {
		return fmt.Errorf("corpus: flush shard: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("corpus: sync shard: %w", err)
	}
	return nil
}

// close finishes the zstd frame, syncs, and renames the shard to its final name.
func (s *shardWriter) close() error {
	err := s.enc.Close()
	if err == nil {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(s.path+partialExt, s.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(s.path))
	}
	if err != nil {
		return fmt.Errorf("corpus: close shard: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// shardFiles lists the shards in dir, sorted by node and sequence.
func shardFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, _, _, ok := parseShardName(e.Name()); ok && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Slice(names, func(i, k int) bool {
		ni, si, _, _ := parseShardName(names[i])
		nk, sk, _, _ := parseShardName(names[k])
		if ni != nk {
			return ni < nk
		}
		if si != sk {
			return si < sk
		}
		return names[i] < names[k]
	})
	return names, nil
}

// readShardLines calls fn for every complete line of a shard. With tolerant (a .partial shard)
// a truncated tail, as left by a crash, ends the read without error; lines are complete
// when they end in '\n' and parse as JSON.
func readShardLines(path string, tolerant bool, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	br := bufio.NewReaderSize(dec, 1<<16)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Long line: gather it.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) < maxLineBytes {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			if err == io.EOF && len(line) == 0 {
				return nil
			}
			if tolerant {
				return nil // truncated tail (partial line or broken block)
			}
			if err == io.EOF {
				return fmt.Errorf("corpus: %s: truncated last line", filepath.Base(path))
			}
			return fmt.Errorf("corpus: read %s: %w", filepath.Base(path), err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// ReadShards calls fn for every record of every shard in dir, shards in node and sequence
// order, lines in file order: finished shards in full, .partial shards (open, or left by a
// crash) up to their last complete line. It takes no lock: while a stage writes to dir, the
// open shard is read up to its last flushed line. An error from fn stops the read and is returned.
func ReadShards(dir string, fn func(Record) error) error {
	names, err := shardFiles(dir)
	if err != nil {
		return fmt.Errorf("corpus: read shards: %w", err)
	}
	finished := make(map[string]bool, len(names))
	for _, name := range names {
		finished[name] = true
	}
	for _, name := range names {
		_, _, partial, _ := parseShardName(name)
		if partial && finished[strings.TrimSuffix(name, partialExt)] {
			continue // leftover of a crash right after a clean close; the finished shard has it all
		}
		err := readShardLines(filepath.Join(dir, name), partial, func(line []byte) error {
			var r Record
			if err := json.Unmarshal(line, &r); err != nil {
				if partial {
					return errStopPartial
				}
				return fmt.Errorf("corpus: %s: %w", name, err)
			}
			return fn(r)
		})
		if err != nil && !errors.Is(err, errStopPartial) {
			return err
		}
	}
	return nil
}

var errStopPartial = errors.New("stop")

// readPartial reads the complete lines of a .partial shard (as left by a crash) and the dedup
// keys (URL + fetch time) of their records.
func readPartial(path string) (keys map[string]bool, lines [][]byte, err error) {
	keys = make(map[string]bool)
	err = readShardLines(path, true, func(line []byte) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return errStopPartial
		}
		keys[recordKey(r.URL, r.FetchTime.UnixNano())] = true
		lines = append(lines, bytes.Clone(line))
		return nil
	})
	if err != nil && !errors.Is(err, errStopPartial) {
		return nil, nil, err
	}
	return keys, lines, nil
}

// finishRecovered writes lines as the finished shard final (through a .recover file, synced and
// renamed) and removes the .partial.
func finishRecovered(partialPath, final string, lines [][]byte) error {
	tmp := final + recoverExt
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	enc, err := newEncoder(f)
	if err != nil {
		f.Close()
		return err
	}
	for _, l := range lines {
		if _, err = enc.Write(l); err != nil {
			break
		}
	}
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = os.Remove(partialPath)
	}
	if err == nil {
		err = syncDir(filepath.Dir(final))
	}
	return err
}

func recordKey(url string, fetchNanos int64) string {
	return url + "\t" + strconv.FormatInt(fetchNanos, 10)
}
