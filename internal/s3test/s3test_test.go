package s3test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestRestartKeepsObjects: an object written before a stop is read back after the restart
// on the same directory and ports, and the store refuses requests while stopped.
func TestRestartKeepsObjects(t *testing.T) {
	s := Start(t, "bkt")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := bytes.Repeat([]byte("crawlnode "), 1000)
	if _, err := s.Client(t).PutObject(ctx, "bkt", "a/b.txt", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	s.Stop()
	t.Logf("stopped in %s", time.Since(t0))
	short, c2 := context.WithTimeout(ctx, 3*time.Second)
	if _, err := s.Client(t).ListBuckets(short); err == nil {
		t.Fatal("stopped store answered")
	}
	c2()
	t0 = time.Now()
	s.Restart()
	t.Logf("restarted in %s", time.Since(t0))
	if got := s.Get(t, "bkt", "a/b.txt"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(data))
	}
	if objs := s.Objects(t, "bkt", "a/"); len(objs) != 1 || objs["a/b.txt"] != int64(len(data)) {
		t.Fatalf("objects %v", objs)
	}
}

// TestBinaryWaitsForBuild: with a build marker naming a live process, Binary waits for the
// binary instead of skipping; a marker whose process is gone is ignored.
func TestBinaryWaitsForBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "weed-test")
	t.Setenv("CRAWLNODE_WEED", bin)
	if _, ok := buildInProgress(bin); ok {
		t.Fatal("a build in progress without a marker")
	}
	if err := os.WriteFile(bin+".building", []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := buildInProgress(bin); ok {
		t.Fatal("a marker naming no live process counts as a build in progress")
	}
	if err := os.WriteFile(bin+".building", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Second)
		_ = os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	}()
	start := time.Now()
	if got := Binary(t); got != bin {
		t.Fatalf("Binary = %q, want %q", got, bin)
	}
	<-done
	if time.Since(start) < time.Second {
		t.Fatalf("Binary returned after %s, before the build ended", time.Since(start))
	}
}
