package api

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// Export file kinds, as GET /v1/export/files lists them.
const (
	ExportKindWARC   = "warc"   // NAME.warc.gz
	ExportKindCDXJ   = "cdxj"   // NAME.warc.gz.cdxj, the index of a closed WARC file
	ExportKindCorpus = "corpus" // corpus-NODE-SEQ.jsonl.zst, or .partial while open
)

// ExportFile is one file a member serves for `crawlnode export --api`.
type ExportFile struct {
	Kind string `json:"kind"`
	Name string `json:"name"` // base name, unique in the cluster (it carries the node's name)
	// Size is the bytes that may be read: the whole of a closed file, the durable prefix of
	// the one being written (complete records an fsync covered).
	Size int64 `json:"size"`
	// Open is true for the file being written; it grows, and a later listing gives more.
	Open bool `json:"open,omitempty"`
}

// ExportListing is GET /v1/export/files.
type ExportListing struct {
	Node  string       `json:"node"`
	Files []ExportFile `json:"files"`
}

// ExportReader is one file opened for download: ReadAt within its first Size bytes.
type ExportReader interface {
	io.ReaderAt
	io.Closer
}

// ExportBackend is what a member serves of its data directory for a cluster export.
type ExportBackend interface {
	// ExportFiles lists this node's WARC files, their CDXJ indexes and its corpus shards,
	// each with the size that may be read now.
	ExportFiles() ([]ExportFile, error)
	// OpenExportFile opens one listed file (kind and a name ValidExportName accepted) and
	// returns the size that may be read now; a file it does not hold is fs.ErrNotExist.
	OpenExportFile(kind, name string) (r ExportReader, size int64, mod time.Time, err error)
}

// ValidExportName reports whether name is a plain file name of kind: no path separators,
// no dot-dot, no control bytes, and the kind's suffix. The backend resolves it inside its
// own directory only, so nothing outside it can be named.
func ValidExportName(kind, name string) bool {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, "/\\") || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return false
		}
	}
	switch kind {
	case ExportKindWARC:
		return strings.HasSuffix(name, ".warc.gz")
	case ExportKindCDXJ:
		return strings.HasSuffix(name, ".warc.gz.cdxj")
	case ExportKindCorpus:
		return strings.HasPrefix(name, "corpus-") &&
			(strings.HasSuffix(name, ".jsonl.zst") || strings.HasSuffix(name, ".jsonl.zst.partial"))
	}
	return false
}

// exportFiles answers GET /v1/export/files.
func (s *server) exportFiles(w http.ResponseWriter, r *http.Request) {
	files, err := s.backend.ExportFiles()
	if err != nil {
		writeErr(w, err, "list export files: ")
		return
	}
	if files == nil {
		files = []ExportFile{}
	}
	WriteJSON(w, http.StatusOK, ExportListing{Node: s.backend.Name(), Files: files})
}

// exportFile answers GET /v1/export/files/{kind}/{name}: the file's readable bytes,
// streamed, with Range requests served (http.ServeContent) so a client can resume.
func (s *server) exportFile(w http.ResponseWriter, r *http.Request) {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	if kind != ExportKindWARC && kind != ExportKindCDXJ && kind != ExportKindCorpus {
		WriteError(w, http.StatusBadRequest, "bad_kind", "export file kind %q: want warc, cdxj or corpus", kind)
		return
	}
	if !ValidExportName(kind, name) {
		WriteError(w, http.StatusBadRequest, "bad_name", "export file name %q is not a %s file name", name, kind)
		return
	}
	f, size, mod, err := s.backend.OpenExportFile(kind, name)
	if errors.Is(err, fs.ErrNotExist) {
		WriteError(w, http.StatusNotFound, "not_found", "no %s file %q on this node", kind, name)
		return
	}
	if err != nil {
		writeErr(w, err, "open export file: ")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store") // an open file grows
	http.ServeContent(w, r, "", mod, io.NewSectionReader(f, 0, size))
}
