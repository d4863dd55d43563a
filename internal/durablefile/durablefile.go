// Package durablefile writes small files so that a power cut leaves either the old
// content or the new one, never an empty or partial file: write to a temporary file in
// the same directory, fsync it, rename it over the target, fsync the directory.
package durablefile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, durably (see the package doc). The temporary file
// is path + ".tmp"; it is removed when the write fails.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making the names created, renamed or removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll is os.MkdirAll followed by an fsync of path's parent, so that a directory
// just created survives a power cut.
func MkdirAll(path string, perm os.FileMode) error {
	if err := os.MkdirAll(path, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}
