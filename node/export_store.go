package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/crawlnode/crawlnode/outstore"
)

// StoreExportOptions say what to export from an output store (export --from).
type StoreExportOptions struct {
	ExportOptions        // DataDir is ignored
	From          string // s3://BUCKET/PREFIX
	Conn          outstore.Conn
	// TempDir holds the downloaded files while the export runs (removed after). Default:
	// the system's temp directory. It needs room for the files the format reads.
	TempDir string
	// Progress, when set, is told of each downloaded file.
	Progress func(node string, e outstore.Entry)
}

// StoreExportStats adds what was read from the store to ExportStats.
type StoreExportStats struct {
	ExportStats
	Nodes      []string // nodes whose manifests were read
	Files      int      // objects downloaded and verified
	Downloaded int64    // their bytes
}

// ExportFromStore writes every node's outputs found in the store, in any format Export
// writes: each node's manifest lists its objects; those the format needs are downloaded
// and verified against the manifest's SHA-256 into a temporary directory laid out as a
// data directory, which the same export code then reads. Decision: a staging copy rather
// than a streaming reader, so every format (the WACZ packer and the CDXJ merge seek in
// their files) shares one code path with export --data; the cost is temporary disk space
// for the files read.
func ExportFromStore(ctx context.Context, o StoreExportOptions) (StoreExportStats, error) {
	var out StoreExportStats
	tg, err := outstore.ParseURL(o.From)
	if err != nil {
		return out, fmt.Errorf("%w: --from: %v", ErrBadConfig, err)
	}
	st, err := outstore.Dial(ctx, tg, o.Conn)
	if err != nil {
		return out, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if out.Nodes, err = st.Nodes(ctx); err != nil {
		return out, err
	}
	if len(out.Nodes) == 0 {
		return out, fmt.Errorf("export: no node manifest under %s (nodes/NODE/manifest.jsonl)", tg)
	}
	tmp, err := os.MkdirTemp(o.TempDir, "crawlnode-export-")
	if err != nil {
		return out, fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := &DataDir{Path: tmp}
	for _, d := range []string{dir.WARCDir(), dir.CorpusDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return out, fmt.Errorf("export: %w", err)
		}
	}
	wantWARC, wantCorpus := formatReads(o.Format)
	for _, nd := range out.Nodes {
		es, err := st.ReadManifest(ctx, nd)
		if err != nil {
			return out, err
		}
		for _, e := range es {
			target := ""
			switch {
			case (e.Kind == outstore.KindWARC || e.Kind == outstore.KindCDXJ) && wantWARC:
				target = dir.WARCDir()
			case e.Kind == outstore.KindCorpus && wantCorpus:
				target = dir.CorpusDir()
			default:
				continue
			}
			if _, err := os.Stat(filepath.Join(target, e.Name)); err == nil {
				return out, fmt.Errorf("export: %s is listed twice (node %s)", e.Name, nd)
			} else if !errors.Is(err, os.ErrNotExist) {
				return out, err
			}
			if err := st.DownloadFile(ctx, e, target); err != nil {
				return out, fmt.Errorf("export: node %s: %w", nd, err)
			}
			out.Files++
			out.Downloaded += e.Size
			if o.Progress != nil {
				o.Progress(nd, e)
			}
		}
	}
	out.ExportStats, err = exportDir(dir, o.ExportOptions)
	return out, err
}

// formatReads says whether a format reads WARC files (with their indexes) and shards.
func formatReads(f ExportFormat) (warc, corpus bool) {
	switch f {
	case ExportJSONL, ExportMarkdown:
		return false, true
	case ExportWACZ:
		return true, true
	}
	return true, false
}

// StoreOnlyFiles lists the files of dataDir's output store manifest copy that are no longer
// in the data directory (removed by --delete-after-upload): export --data cannot read them,
// export --from can. target is the store's URL ("" when the node had no output store).
func StoreOnlyFiles(dataDir string) (target string, names []string, err error) {
	st, err := outstore.ReadState(filepath.Join(dataDir, OutputStoreStateFile))
	if err != nil || st == nil {
		return "", nil, err
	}
	dir := &DataDir{Path: dataDir}
	for _, e := range st.Entries {
		p := filepath.Join(dir.WARCDir(), e.Name)
		if e.Kind == outstore.KindCorpus {
			p = filepath.Join(dir.CorpusDir(), e.Name)
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			names = append(names, e.Name)
		}
	}
	return st.Target, names, nil
}
