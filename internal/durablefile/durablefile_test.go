package durablefile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the target holds the new bytes with the given mode, replacing the old
// content; no temporary file is left; a write into a missing directory is an error and
// leaves nothing behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, want := range []string{"first", "second, longer than the first"} {
		if err := WriteFile(p, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	missing := filepath.Join(dir, "no-such-dir", "f")
	if err := WriteFile(missing, []byte("x"), 0o600); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	if _, err := os.Stat(missing + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left after a failed write: %v", err)
	}
}

// TestMkdirAll: nested directories are created and SyncDir accepts them.
func TestMkdirAll(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		t.Fatalf("not a directory: %v", err)
	}
	if err := SyncDir(d); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(d, "missing")); err == nil {
		t.Error("SyncDir of a missing directory succeeded")
	}
}
