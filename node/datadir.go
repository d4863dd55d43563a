package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crawlnode/crawlnode/internal/durablefile"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DataFormat is the version of the on-disk layout this binary reads and writes. A data
// directory written with another format is refused rather than guessed at.
const DataFormat = 1

const markerName = "CRAWLNODE.json"

// Sentinel errors for the data directory.
var (
	ErrNotDataDir      = errors.New("not a crawlnode data directory")
	ErrIncompatible    = errors.New("data directory from an incompatible version")
	ErrOtherNode       = errors.New("data directory belongs to another node")
	ErrDataDirInUse    = errors.New("data directory is in use by another process")
	ErrDataDirNotFound = errors.New("data directory does not exist")
)

// marker is the identity file at the root of a data directory.
type marker struct {
	Format  int       `json:"format"`
	Node    string    `json:"node"`
	Created time.Time `json:"created"`
}

// DataDir is an opened, locked data directory.
type DataDir struct {
	Path string
	Node string
	lock *os.File
}

// Layout of a data directory.
func (d *DataDir) BadgerDir() string { return filepath.Join(d.Path, "badger") }
func (d *DataDir) WARCDir() string   { return filepath.Join(d.Path, "warc") }
func (d *DataDir) CorpusDir() string { return filepath.Join(d.Path, "corpus") }

// PDFCacheDir is where the PDF engine's compiled code is kept: the user's cache directory
// when there is one (shared by the nodes of a machine: the code depends only on the
// module and wazero's version), else the data directory (a FROM scratch image has no
// $HOME).
func (d *DataDir) PDFCacheDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "crawlnode-pdfium")
	}
	return filepath.Join(d.Path, "pdfium-cache")
}

// SeenIndexDir holds the frontier's seen-index files while the node runs (unlinked while
// open, so it stays empty; rebuilt from Badger at every start).
func (d *DataDir) SeenIndexDir() string { return filepath.Join(d.Path, "seenidx") }

// CheckDataDir validates an existing data directory without writing anything. A missing
// or empty directory is fine (it will be created). wantNode, when set, must match the name
// recorded in the directory.
func CheckDataDir(path, wantNode string) (existing *marker, err error) {
	entries, err := os.ReadDir(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", path, err)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(path, markerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (it is not empty and has no %s)", path, ErrNotDataDir, markerName)
	}
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", path, err)
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w: unreadable %s: %v", path, ErrNotDataDir, markerName, err)
	}
	if m.Format != DataFormat {
		return nil, fmt.Errorf("%s: %w: format %d, this binary reads format %d", path, ErrIncompatible, m.Format, DataFormat)
	}
	if wantNode != "" && m.Node != wantNode {
		return nil, fmt.Errorf("%s: %w: it is node %q, not %q", path, ErrOtherNode, m.Node, wantNode)
	}
	return &m, nil
}

// OpenDataDir checks, creates if needed, and locks a data directory. The node name is
// taken from the directory when it has one, else wantNode, else a new random name; it is
// stable across restarts.
func OpenDataDir(path, wantNode string) (*DataDir, error) {
	m, err := CheckDataDir(path, wantNode)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(path, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrDataDirInUse)
	}
	if m == nil {
		name := wantNode
		if name == "" {
			name = randomName()
		}
		m = &marker{Format: DataFormat, Node: name, Created: time.Now().UTC()}
		b, _ := json.MarshalIndent(m, "", "  ")
		// Durably (fsync, rename, fsync the directory): a power cut right after the first
		// start must not leave an empty marker, which no later start could read.
		if err := durablefile.WriteFile(filepath.Join(path, markerName), append(b, '\n'), 0o644); err != nil {
			lf.Close()
			return nil, fmt.Errorf("write %s: %w", markerName, err)
		}
	}
	for _, sub := range []string{"badger", "warc", "corpus"} {
		if err := durablefile.MkdirAll(filepath.Join(path, sub), 0o755); err != nil {
			lf.Close()
			return nil, fmt.Errorf("create %s: %w", sub, err)
		}
	}
	return &DataDir{Path: path, Node: m.Node, lock: lf}, nil
}

// Close releases the directory lock.
func (d *DataDir) Close() error {
	if d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

func randomName() string {
	var b [4]byte
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = f.Read(b[:])
		f.Close()
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	return fmt.Sprintf("%s-%x", host, b)
}
