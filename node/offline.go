package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/ring"
)

// ListDeadLetters calls fn for every dead letter of a stopped node's data directory.
func ListDeadLetters(dataDir string, fn func(frontier.DeadLetter) bool) error {
	m, err := CheckDataDir(dataDir, "")
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%s: %w", dataDir, ErrDataDirNotFound)
	}
	dir, err := OpenDataDir(dataDir, "")
	if err != nil {
		return err
	}
	defer dir.Close()
	db, err := openBadger(dir.BadgerDir(), true)
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := frontier.Open(frontier.Config{DB: db, PartitionOf: ring.PartitionOf})
	if err != nil {
		return err
	}
	defer f.Close()
	return f.DeadLetters(fn)
}

// ExportFormat is what `crawlnode export` writes.
type ExportFormat string

const (
	ExportJSONL ExportFormat = "jsonl" // the text corpus, one JSON record a line (zstd when out ends in .zst)
	ExportWARC  ExportFormat = "warc"  // every WARC file, concatenated (gzip members stay valid)
	ExportURLs  ExportFormat = "urls"  // url, status, date, WARC file and offset, tab-separated
	// ExportMarkdown writes one Markdown file a kept page under the directory Out:
	// Out/<host>/<name>.md with front matter (corpus.MarkdownTree).
	ExportMarkdown ExportFormat = "markdown"
	ExportCDXJ     ExportFormat = "cdxj" // the CDXJ index of every WARC file, merged and sorted
	ExportWACZ     ExportFormat = "wacz" // WARC files, their CDXJ index and a page list as WACZ 1.1
)

// ExportOptions say what to export.
type ExportOptions struct {
	DataDir           string
	Format            ExportFormat
	Out               string // "-" for standard output; a directory for markdown
	IncludeDuplicates bool   // jsonl: keep records marked duplicate_of
	IncludeRejected   bool   // jsonl: keep records a quality filter or opt-out rejected
}

// ExportStats counts what an export wrote.
type ExportStats struct {
	Records int
	Skipped int
	// Damaged lists the unreadable regions of WARC files that the export skipped.
	Damaged []archive.Damage
}

func (st *ExportStats) damaged(d archive.Damage) { st.Damaged = append(st.Damaged, d) }

// Export writes a node's outputs. It reads only files (WARC and corpus shards), never
// Badger, so it works while the node runs: the file being written is read up to its last
// complete record.
func Export(o ExportOptions) (ExportStats, error) {
	var st ExportStats
	m, err := CheckDataDir(o.DataDir, "")
	if err != nil {
		return st, err
	}
	if m == nil {
		return st, fmt.Errorf("%s: %w", o.DataDir, ErrDataDirNotFound)
	}
	return exportDir(&DataDir{Path: o.DataDir}, o)
}

// exportDir writes the outputs found in dir's warc and corpus directories.
func exportDir(dir *DataDir, o ExportOptions) (ExportStats, error) {
	var st ExportStats
	var err error
	if o.Format == ExportMarkdown {
		return st, exportMarkdown(dir, o, &st)
	}
	var w io.Writer
	var closeOut func() error
	if o.Out == "-" {
		w, closeOut = os.Stdout, func() error { return nil }
	} else {
		fh, err := os.Create(o.Out)
		if err != nil {
			return st, fmt.Errorf("export: %w", err)
		}
		w, closeOut = fh, fh.Close
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	switch o.Format {
	case ExportJSONL:
		err = exportJSONL(dir, o, bw, &st)
	case ExportWARC:
		err = exportWARC(dir, bw, &st)
	case ExportURLs:
		err = exportURLs(dir, bw, &st)
	case ExportCDXJ:
		err = exportCDXJ(dir, bw, &st)
	case ExportWACZ:
		err = exportWACZ(dir, bw, &st)
	default:
		err = fmt.Errorf("%w: export format %q: want jsonl, markdown, warc, urls, cdxj or wacz", ErrBadConfig, o.Format)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	return st, err
}

func exportJSONL(dir *DataDir, o ExportOptions, w io.Writer, st *ExportStats) error {
	return writeJSONL(o, w, st, func(emit func(*corpus.Record) error) error {
		return eachKept(dir, o, st, emit)
	})
}

// writeJSONL writes the records each emits as JSON lines to w, zstd-compressed when o.Out
// ends in .zst; export --data and the cluster's merge (export --api, --from) share it.
func writeJSONL(o ExportOptions, w io.Writer, st *ExportStats, each func(emit func(*corpus.Record) error) error) error {
	var enc io.WriteCloser
	if strings.HasSuffix(o.Out, ".zst") {
		zw, err := zstd.NewWriter(w)
		if err != nil {
			return err
		}
		enc, w = zw, zw
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	err := each(func(r *corpus.Record) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		st.Records++
		bw.Write(b)
		return bw.WriteByte('\n')
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if enc != nil {
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// exportMarkdown writes the kept records (and duplicates or rejected ones when asked, where
// they have text) as a Markdown tree under o.Out, which must be empty or absent.
func exportMarkdown(dir *DataDir, o ExportOptions, st *ExportStats) error {
	if o.Out == "-" {
		return fmt.Errorf("%w: export markdown writes a directory: give --out DIR", ErrBadConfig)
	}
	return writeMarkdown(o, st, func(emit func(*corpus.Record) error) error {
		return eachKept(dir, o, st, emit)
	})
}

// writeMarkdown writes the records each emits as a Markdown tree under o.Out (a record
// without text is skipped); export --data and the cluster's merge share it.
func writeMarkdown(o ExportOptions, st *ExportStats, each func(emit func(*corpus.Record) error) error) error {
	tree, err := corpus.NewMarkdownTree(o.Out)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer tree.Close()
	return each(func(r *corpus.Record) error {
		rel, err := tree.Write(r)
		if err != nil {
			return err
		}
		if rel == "" {
			st.Skipped++ // no text to write
			return nil
		}
		st.Records++
		return nil
	})
}

// eachKept calls emit for each record of dir's shards that o keeps (duplicates and
// rejected pages only when asked), counting the others as skipped.
func eachKept(dir *DataDir, o ExportOptions, st *ExportStats, emit func(*corpus.Record) error) error {
	return corpus.ReadShards(dir.CorpusDir(), func(r corpus.Record) error {
		if !o.keeps(&r) {
			st.Skipped++
			return nil
		}
		return emit(&r)
	})
}

// keeps tells whether the export writes r: duplicates and rejected pages only when asked.
func (o ExportOptions) keeps(r *corpus.Record) bool {
	return (r.DuplicateOf == "" || o.IncludeDuplicates) && (r.Rejected == "" || o.IncludeRejected)
}

func warcFiles(dir *DataDir) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir.WARCDir(), "*.warc.gz"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	return files, nil
}

// exportWARC copies every readable record of every WARC file. A damaged region (a torn
// tail, a bad sector) is skipped and reported; the records around it are kept.
func exportWARC(dir *DataDir, w io.Writer, st *ExportStats) error {
	files, err := warcFiles(dir)
	if err != nil {
		return err
	}
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		err = archive.ScanSalvage(path, func(off, length int64, _ *archive.Record) error {
			if _, err := io.Copy(w, io.NewSectionReader(fh, off, length)); err != nil {
				return fmt.Errorf("export %s: %w", path, err)
			}
			st.Records++
			return nil
		}, st.damaged)
		fh.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// exportURLs lists every archived fetch.
func exportURLs(dir *DataDir, w io.Writer, st *ExportStats) error {
	files, err := warcFiles(dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "url\tstatus\tdate\trecord\twarc_file\toffset")
	for _, path := range files {
		base := filepath.Base(path)
		err := archive.ScanSalvage(path, func(off, _ int64, r *archive.Record) error {
			if r.Type != "response" && r.Type != "revisit" {
				return nil
			}
			st.Records++
			_, err := fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\n", r.TargetURI, r.HTTPStatus, r.Date.UTC().Format("2006-01-02T15:04:05Z"), r.Type, base, off)
			return err
		}, st.damaged)
		if err != nil {
			return err
		}
	}
	return nil
}
