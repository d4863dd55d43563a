package node

// What a member serves of its data directory for `crawlnode export --api` (the public
// routes GET /v1/export/files[/{kind}/{name}], package api): its WARC files, their CDXJ
// indexes and its corpus shards, each up to the part that is durable now.
//
// The order of the checks matters while the node writes: a file is listed (or looked up)
// first, the writer's durable mark is read next, and the file's size last. A WARC file
// that is not the open one by then is closed for good (names are never reused), so its
// size is final; the open one is served up to its last fsync, which ends on a record.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
)

// exportDir is the directory of kind's files.
func (n *Node) exportDir(kind string) string {
	if kind == api.ExportKindCorpus {
		return n.dir.CorpusDir()
	}
	return n.dir.WARCDir()
}

// warcDurable is the open WARC file and its durable size ("" when none is open).
func (n *Node) warcDurable() (string, int64) {
	if n.warc == nil {
		return "", 0
	}
	return n.warc.Durable()
}

// shardDurable is the open corpus shard's flushed part (nil when none is open).
func (n *Node) shardDurable() *corpus.DurableShard {
	if n.stage == nil {
		return nil
	}
	return n.stage.Durable()
}

// ExportFiles lists what GET /v1/export/files serves: every WARC file (the open one up to
// its last fsync), the CDXJ index of every closed WARC file that has one, and every corpus
// shard (the open one up to its last flush; a .partial left by a crash whole: readers take
// such a file up to its last complete line).
func (n *Node) ExportFiles() ([]api.ExportFile, error) {
	warcNames, err := readNames(n.dir.WARCDir())
	if err != nil {
		return nil, err
	}
	shardNames, err := readNames(n.dir.CorpusDir())
	if err != nil {
		return nil, err
	}
	openWARC, openSize := n.warcDurable()
	openShard := n.shardDurable()
	var out []api.ExportFile
	have := map[string]bool{}
	for _, name := range warcNames {
		have[name] = true
	}
	for _, name := range warcNames {
		if !api.ValidExportName(api.ExportKindWARC, name) {
			continue
		}
		if name == openWARC {
			out = append(out, api.ExportFile{Kind: api.ExportKindWARC, Name: name, Size: openSize, Open: true})
			continue
		}
		if fi, err := os.Stat(filepath.Join(n.dir.WARCDir(), name)); err == nil {
			out = append(out, api.ExportFile{Kind: api.ExportKindWARC, Name: name, Size: fi.Size()})
		}
		if idx := name + archive.IndexSuffix; have[idx] {
			if fi, err := os.Stat(filepath.Join(n.dir.WARCDir(), idx)); err == nil {
				out = append(out, api.ExportFile{Kind: api.ExportKindCDXJ, Name: idx, Size: fi.Size()})
			}
		}
	}
	listed := map[string]bool{}
	for _, name := range shardNames {
		if !api.ValidExportName(api.ExportKindCorpus, name) || listed[name] {
			continue
		}
		f, ok := n.shardFile(name, openShard)
		if !ok && strings.HasSuffix(name, ".partial") {
			// Closed (renamed) since the listing: take the finished shard.
			name = strings.TrimSuffix(name, ".partial")
			f, ok = n.shardFile(name, nil)
		}
		if ok && !listed[f.Name] {
			listed[f.Name] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// shardFile is one corpus shard's entry; ok is false when it is gone.
func (n *Node) shardFile(name string, open *corpus.DurableShard) (api.ExportFile, bool) {
	if open != nil && open.Name == name {
		return api.ExportFile{Kind: api.ExportKindCorpus, Name: name, Size: open.Size, Open: true}, true
	}
	fi, err := os.Stat(filepath.Join(n.dir.CorpusDir(), name))
	if err != nil {
		return api.ExportFile{}, false
	}
	return api.ExportFile{Kind: api.ExportKindCorpus, Name: name, Size: fi.Size()}, true
}

// OpenExportFile opens one file of ExportFiles by kind and name (a name api.ValidExportName
// accepted: a plain name, so it stays inside the node's directory) with its readable size.
// The index of the open WARC file does not exist yet: fs.ErrNotExist.
func (n *Node) OpenExportFile(kind, name string) (api.ExportReader, int64, time.Time, error) {
	if !api.ValidExportName(kind, name) {
		return nil, 0, time.Time{}, fs.ErrNotExist
	}
	f, err := os.Open(filepath.Join(n.exportDir(kind), name))
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	fail := func(err error) (api.ExportReader, int64, time.Time, error) {
		f.Close()
		return nil, 0, time.Time{}, err
	}
	var openName string
	var openSize int64
	switch kind {
	case api.ExportKindWARC:
		openName, openSize = n.warcDurable()
	case api.ExportKindCorpus:
		if d := n.shardDurable(); d != nil {
			openName, openSize = d.Name, d.Size
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fs.ErrNotExist)
	}
	size := fi.Size()
	if name == openName {
		size = min(size, openSize)
	}
	return f, size, fi.ModTime(), nil
}

// readNames lists the file names in dir, sorted; a missing dir has none.
func readNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}
