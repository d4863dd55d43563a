package node

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamagedDataDirIsAnError: a data directory a power cut (or a bad disk) left damaged
// is refused with an error naming what could not be opened, not a panic, and the files are
// left as they were for the operator to look at. (An empty memtable file, what a cut
// leaves of Badger without SyncWrites, is refused too: "open badger at DIR: while opening
// memtables ...", but Badger v4.9.6 leaves goroutines behind when that open fails, which
// goleak would report; a TestPowerCut run with --no-fsync met exactly that error.)
func TestDamagedDataDirIsAnError(t *testing.T) {
	cfg := func(dir string) Config {
		return Config{DataDir: dir, MinFreeDisk: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	cases := map[string]func(t *testing.T, dir string){
		"empty marker": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, markerName), nil, 0o644)
		},
		"garbage manifest": func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "badger", "MANIFEST"), []byte("not a manifest at all, just bytes"), 0o644)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			n, err := New(cfg(dir))
			if err != nil {
				t.Fatal(err)
			}
			n.closeStores()
			damage(t, dir)
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("New panicked on a damaged data directory: %v", r)
					}
				}()
				n, err = New(cfg(dir))
			}()
			if err == nil {
				n.closeStores()
				t.Fatalf("New opened a damaged data directory (%s)", name)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("the error does not name the directory: %v", err)
			}
			t.Logf("%s: %v", name, err)
		})
	}
}
