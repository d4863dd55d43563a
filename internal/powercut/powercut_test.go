package powercut

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func mount(t *testing.T) (*FS, string, string) {
	t.Helper()
	backing, mnt := filepath.Join(t.TempDir(), "b"), filepath.Join(t.TempDir(), "m")
	os.MkdirAll(backing, 0o755)
	os.MkdirAll(mnt, 0o755)
	f, err := Mount(backing, mnt)
	if errors.Is(err, ErrUnavailable) {
		t.Skip("FUSE unavailable: ", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f, backing, mnt
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestCutKeepsOnlySynced: synced data and names survive, the rest is gone.
func TestCutKeepsOnlySynced(t *testing.T) {
	f, backing, mnt := mount(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// a: written and fsynced, then appended without fsync.
	a, err := os.Create(filepath.Join(mnt, "a"))
	must(err)
	_, err = a.WriteString("durable")
	must(err)
	must(a.Sync())
	_, err = a.WriteString("+lost")
	must(err)
	_, err = a.WriteAt([]byte("X"), 0)
	must(err)
	// b: created, written, never fsynced; its name is committed by c's fsync below (one
	// journal), its data is not.
	must(os.WriteFile(filepath.Join(mnt, "b"), []byte("never synced"), 0o644))
	// c: created and fsynced, then replaced by rename of an unsynced file, then unlinked.
	must(os.WriteFile(filepath.Join(mnt, "c"), []byte("old c"), 0o644))
	c, err := os.OpenFile(filepath.Join(mnt, "c"), os.O_RDWR, 0)
	must(err)
	must(c.Sync())
	c.Close()
	must(os.WriteFile(filepath.Join(mnt, "c.tmp"), []byte("new c"), 0o644))
	must(os.Rename(filepath.Join(mnt, "c.tmp"), filepath.Join(mnt, "c")))
	if got := read(t, filepath.Join(mnt, "c")); got != "new c" {
		t.Fatalf("before the cut c = %q", got)
	}
	// d: a directory made, then a file in it, truncated.
	must(os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	must(os.WriteFile(filepath.Join(mnt, "d", "e"), []byte("e"), 0o644))
	must(a.Truncate(3))
	a.Close()
	must(f.Cut())
	if got := read(t, filepath.Join(backing, "a")); got != "durable" {
		t.Errorf("a = %q, want %q", got, "durable")
	}
	if got := read(t, filepath.Join(backing, "b")); got != "" {
		t.Errorf("b = %q, want empty", got)
	}
	if got := read(t, filepath.Join(backing, "c")); got != "old c" {
		t.Errorf("c = %q, want %q", got, "old c")
	}
	for _, p := range []string{"c.tmp", "d", trashDir} {
		if _, err := os.Stat(filepath.Join(backing, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived: %v", p, err)
		}
	}
	syncs, writes, lw, ln := f.Stats()
	t.Logf("syncs %d writes %d lost writes %d lost names %d", syncs, writes, lw, ln)
}

// TestSyncedUnlinkStays: an unlink followed by an fsync is durable.
func TestSyncedUnlinkStays(t *testing.T) {
	f, backing, mnt := mount(t)
	os.WriteFile(filepath.Join(mnt, "x"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(mnt, "y"), []byte("y"), 0o644)
	if err := os.Remove(filepath.Join(mnt, "x")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(backing, "x")); !os.IsNotExist(err) {
		t.Errorf("x came back: %v", err)
	}
	// y's name is durable (the directory fsync), its data is not: an empty file.
	if got := read(t, filepath.Join(backing, "y")); got != "" {
		t.Errorf("y = %q, want empty", got)
	}
}
