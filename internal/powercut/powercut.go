// Package powercut is a FUSE file system for tests that simulates a power cut: a
// passthrough to a backing directory that remembers every change not yet made durable by
// an fsync, and on Cut throws those changes away, leaving in the backing directory exactly
// what a disk would hold after the power went out at that instant. No production code
// imports it.
//
// # The rule: what an fsync makes durable
//
// It models a journaling file system in its usual mode (ext4 data=ordered), taking the
// worst case wherever the real one may or may not have written something:
//
//   - File data: every write(2), mmap write-back, truncate, fallocate and O_TRUNC of a file
//     is lost unless an fsync (or fdatasync, msync(MS_SYNC)) of that same file followed it.
//     The kernel may write dirty pages back earlier on a real disk; assuming it never did is
//     the worst case, and the only one a program may rely on. Torn writes within one
//     write(2) are not simulated: a write is lost or kept whole.
//   - Names (create, mkdir, unlink, rmdir, rename): they form one journal, durable in order.
//     An fsync of any file or directory commits every name operation before it (ext4 commits
//     its whole running transaction on fsync). Uncommitted ones are undone at the cut, newest
//     first: a created file disappears (with its data), an unlinked or renamed-over file
//     comes back with the data it had. So a file created and fsynced is there after the cut
//     even if its directory was never fsynced, as on ext4; a program that needs the same on
//     file systems without that ordering (XFS, btrfs) must fsync the directory too.
//   - Links, symlinks, device nodes and copy_file_range are refused (ENOTSUP): nothing
//     under test uses them and modelling them is not worth it.
//
// # Mechanism
//
// Changes reach the backing directory at once (reads see them, as they would in the page
// cache), and an undo record is kept for each: the bytes a write overwrote and the size
// before it, the bytes a truncate cut off; an unlinked file or a file replaced by rename is
// moved to a trash directory inside the backing directory rather than removed, so it can
// come back. An fsync drops the file's undo records (and commits the name journal, whose
// trash is then emptied). Cut, after the process under test was killed, makes every later
// request a no-op (dirty pages the kernel still writes back after the kill reach nothing),
// unmounts, and applies the undo records in reverse: file data first (files found by inode
// number), then the name journal, newest first. Memory grows with the unsynced writes;
// runs of zeros are held as a length only.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// trashDir is the backing directory's hidden subdirectory that holds unlinked files until
// their unlink is committed. It is not visible through the mount.
const trashDir = ".powercut-trash"

// ErrUnavailable is returned by Mount when FUSE cannot be used here (no /dev/fuse, no
// permission to mount).
var ErrUnavailable = errors.New("powercut: FUSE unavailable")

// FS is one mounted power-cut file system.
type FS struct {
	backing, mnt string
	server       *fuse.Server

	mu      sync.Mutex
	cut     bool
	data    map[uint64][]undo // backing inode -> unsynced changes, oldest first
	journal []nameOp          // uncommitted name operations, oldest first
	trashN  int
	// Stats for the test's log.
	syncs, writes, lostWrites, lostNames int
}

// undo reverts one data change: write old at off (zeros of zeroLen when old is nil), then
// cut or extend the file to size.
type undo struct {
	off     int64
	old     []byte
	zeroLen int64
	size    int64
}

type nameKind int

const (
	opCreate nameKind = iota // path was created (file or directory)
	opUnlink                 // path was moved to trash (file) / removed (directory)
	opRename                 // from -> to, with to's former file moved to trash
)

// nameOp is one uncommitted name operation, paths relative to the backing directory.
type nameOp struct {
	kind     nameKind
	dir      bool
	path, to string
	trash    string // unlink: where the file went; rename: where the replaced file went ("" none)
}

// Mount mounts a power-cut file system at mnt over the directory backing (both must
// exist). It returns an error wrapping ErrUnavailable when FUSE cannot be mounted.
func Mount(backing, mnt string) (*FS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(backing, trashDir), 0o755); err != nil {
		return nil, err
	}
	f := &FS{backing: backing, mnt: mnt, data: map[uint64][]undo{}}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root := &gofs.LoopbackRoot{Path: backing, Dev: st.Dev}
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, fs: f}
	}
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	zero := time.Duration(0)
	opts := &gofs.Options{
		// No attribute or entry caching: the backing directory changes under the kernel
		// only through us, but keeping it simple keeps sizes exact.
		AttrTimeout:  &zero,
		EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:      "powercut",
			Name:        "powercut",
			DirectMount: true,
			MaxWrite:    1 << 20,
		},
	}
	srv, err := gofs.Mount(mnt, rootNode, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	f.server = srv
	return f, nil
}

// Stats reports fsyncs and writes seen, and what the last Cut threw away.
func (f *FS) Stats() (syncs, writes, lostWrites, lostNames int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs, f.writes, f.lostWrites, f.lostNames
}

// Unmount unmounts without a cut (everything written stays, synced or not).
func (f *FS) Unmount() error {
	f.mu.Lock()
	f.cut = true
	f.mu.Unlock()
	return f.unmount()
}

func (f *FS) unmount() error {
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Cut is the power cut: every change not made durable by an fsync is thrown away, the
// file system is unmounted, and the backing directory holds what survived. The process
// writing to the mount must be dead already (kill it with SIGKILL first); mount again to
// restart on what was durable.
func (f *FS) Cut() error {
	f.mu.Lock()
	f.cut = true
	data, journal := f.data, f.journal
	f.data, f.journal = map[uint64][]undo{}, nil
	f.mu.Unlock()
	if err := f.unmount(); err != nil {
		return fmt.Errorf("powercut: unmount: %w", err)
	}
	// File data first, found by inode number (a file may have been renamed since).
	paths := map[uint64]string{}
	filepath.WalkDir(f.backing, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				paths[st.Ino] = p
			}
		}
		return nil
	})
	lostWrites := 0
	for ino, us := range data {
		p, ok := paths[ino]
		if !ok {
			continue // a file whose unlink was committed: gone anyway
		}
		if err := revert(p, us); err != nil {
			return err
		}
		lostWrites += len(us)
	}
	for i := len(journal) - 1; i >= 0; i-- {
		if err := f.undoName(journal[i]); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.lostWrites, f.lostNames = lostWrites, len(journal)
	f.mu.Unlock()
	return os.RemoveAll(filepath.Join(f.backing, trashDir))
}

// Remount mounts the backing directory again at the same place after a Cut.
func (f *FS) Remount() (*FS, error) { return Mount(f.backing, f.mnt) }

func revert(p string, us []undo) error {
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powercut: revert %s: %w", p, err)
	}
	defer fd.Close()
	for i := len(us) - 1; i >= 0; i-- {
		u := us[i]
		if u.old != nil {
			if _, err := fd.WriteAt(u.old, u.off); err != nil {
				return err
			}
		} else if u.zeroLen > 0 {
			if _, err := fd.WriteAt(make([]byte, u.zeroLen), u.off); err != nil {
				return err
			}
		}
		if err := fd.Truncate(u.size); err != nil {
			return err
		}
	}
	return nil
}

func (f *FS) undoName(op nameOp) error {
	abs := func(p string) string { return filepath.Join(f.backing, p) }
	switch op.kind {
	case opCreate:
		if op.dir {
			return os.RemoveAll(abs(op.path))
		}
		if err := os.Remove(abs(op.path)); err != nil && !os.IsNotExist(err) {
			return err
		}
	case opUnlink:
		if op.dir {
			return os.Mkdir(abs(op.path), 0o755)
		}
		return os.Rename(abs(op.trash), abs(op.path))
	case opRename:
		if err := os.Rename(abs(op.to), abs(op.path)); err != nil {
			return err
		}
		if op.trash != "" {
			return os.Rename(abs(op.trash), abs(op.to))
		}
	}
	return nil
}

// commitNames makes every name operation so far durable (an fsync happened).
func (f *FS) commitNamesLocked() {
	for _, op := range f.journal {
		if op.trash != "" {
			p := filepath.Join(f.backing, op.trash)
			if ino := inoOf(p); ino != 0 {
				delete(f.data, ino)
			}
			os.Remove(p)
		}
	}
	f.journal = f.journal[:0]
}

func inoOf(p string) uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil {
		return 0
	}
	return st.Ino
}

// trashLocked moves the backing file rel to the trash and returns its trash path.
func (f *FS) trashLocked(rel string) (string, error) {
	f.trashN++
	t := filepath.Join(trashDir, strconv.Itoa(f.trashN))
	if err := os.Rename(filepath.Join(f.backing, rel), filepath.Join(f.backing, t)); err != nil {
		return "", err
	}
	return t, nil
}

// recordWrite saves what a write of n bytes at off is about to overwrite in fd.
func (f *FS) recordWriteLocked(fd int, off, n int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	u := undo{off: off, size: st.Size}
	if end := min(off+n, st.Size); end > off {
		buf := make([]byte, end-off)
		if _, err := syscall.Pread(fd, buf, off); err != nil {
			return gofs.ToErrno(err)
		}
		if allZero(buf) {
			u.zeroLen = int64(len(buf))
		} else {
			u.old = buf
		}
	}
	f.data[st.Ino] = append(f.data[st.Ino], u)
	f.writes++
	return 0
}

// recordResizeLocked saves what resizing fd to size is about to cut off.
func (f *FS) recordResizeLocked(fd int, size int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	if size == st.Size {
		return 0
	}
	// Bytes beyond the new size, in chunks, skipping zeros; the undo list reverts in
	// reverse order, so the final size entry comes first and the data after it.
	f.data[st.Ino] = append(f.data[st.Ino], undo{off: 0, size: st.Size})
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	for off := size; off < st.Size; off += chunk {
		n := min(chunk, st.Size-off)
		if _, err := syscall.Pread(fd, buf[:n], off); err != nil {
			return gofs.ToErrno(err)
		}
		if !allZero(buf[:n]) {
			f.data[st.Ino] = append(f.data[st.Ino], undo{off: off, old: append([]byte(nil), buf[:n]...), size: st.Size})
		}
	}
	f.writes++
	return 0
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// syncedLocked records an fsync of the file with inode ino (0: a directory).
func (f *FS) syncedLocked(ino uint64) {
	if ino != 0 {
		delete(f.data, ino)
	}
	f.commitNamesLocked()
	f.syncs++
}

// node is a loopback node that records what it changes.
type node struct {
	gofs.LoopbackNode
	fs *FS
}

func (n *node) rel(name string) string {
	p := n.Path(n.Root())
	return filepath.Join(p, name)
}

func fdOf(fh gofs.FileHandle) (int, bool) {
	if h, ok := fh.(*fileHandle); ok {
		return h.f.PassthroughFd()
	}
	return 0, false
}

// fileHandle hides the loopback file's PassthroughFd: with kernel passthrough (Linux 6.9+)
// reads and writes would go straight to the backing file, around the recording.
type fileHandle struct{ f *gofs.LoopbackFile }

func wrap(fh gofs.FileHandle) gofs.FileHandle {
	if lf, ok := fh.(*gofs.LoopbackFile); ok {
		return &fileHandle{f: lf}
	}
	return fh
}

func (h *fileHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.f.Read(ctx, buf, off)
}
func (h *fileHandle) Release(ctx context.Context) syscall.Errno { return h.f.Release(ctx) }
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno   { return h.f.Flush(ctx) }
func (h *fileHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.f.Getattr(ctx, out)
}
func (h *fileHandle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return h.f.Setattr(ctx, in, out)
}
func (h *fileHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.f.Lseek(ctx, off, whence)
}

var (
	_ gofs.NodeWriter         = (*node)(nil)
	_ gofs.NodeWritever       = (*node)(nil)
	_ gofs.NodeFsyncer        = (*node)(nil)
	_ gofs.NodeSetattrer      = (*node)(nil)
	_ gofs.NodeAllocater      = (*node)(nil)
	_ gofs.NodeOpendirHandler = (*node)(nil)
)

func (n *node) Write(ctx context.Context, fh gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return uint32(len(data)), 0
	}
	fd, ok := fdOf(fh)
	if !ok {
		return 0, syscall.EIO
	}
	if e := n.fs.recordWriteLocked(fd, off, int64(len(data))); e != 0 {
		return 0, e
	}
	w, err := syscall.Pwrite(fd, data, off)
	if err != nil {
		return uint32(max(w, 0)), gofs.ToErrno(err)
	}
	return uint32(w), 0
}

func (n *node) Writev(ctx context.Context, fh gofs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	return n.Write(ctx, fh, all, off)
}

func (n *node) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return 0
	}
	fd, ok := fdOf(fh)
	if !ok {
		// A directory, or an fsync without an open handle: sync the path.
		d, err := syscall.Open(filepath.Join(n.fs.backing, n.rel("")), syscall.O_RDONLY, 0)
		if err != nil {
			return gofs.ToErrno(err)
		}
		defer syscall.Close(d)
		fd = d
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	ino := st.Ino
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		ino = 0
	}
	n.fs.syncedLocked(ino)
	return 0
}

func (n *node) Allocate(ctx context.Context, fh gofs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return 0
	}
	fd, ok := fdOf(fh)
	if !ok {
		return syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	if end := int64(off + size); end > st.Size {
		n.fs.data[st.Ino] = append(n.fs.data[st.Ino], undo{size: st.Size})
	}
	return gofs.ToErrno(syscall.Fallocate(fd, 0, int64(off), int64(size)))
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		n.fs.mu.Lock()
		if n.fs.cut {
			n.fs.mu.Unlock()
			return 0
		}
		fd, ok := fdOf(fh)
		if !ok {
			d, err := syscall.Open(filepath.Join(n.fs.backing, n.rel("")), syscall.O_RDWR, 0)
			if err != nil {
				n.fs.mu.Unlock()
				return gofs.ToErrno(err)
			}
			defer syscall.Close(d)
			fd = d
		}
		e := n.fs.recordResizeLocked(fd, int64(sz))
		n.fs.mu.Unlock()
		if e != 0 {
			return e
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, ff, e := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	fh = wrap(fh)
	if e != 0 || flags&syscall.O_TRUNC == 0 {
		return fh, ff, e
	}
	fd, _ := fdOf(fh)
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return fh, ff, 0
	}
	if e := n.fs.recordResizeLocked(fd, 0); e != 0 {
		return nil, 0, e
	}
	return fh, ff, gofs.ToErrno(syscall.Ftruncate(fd, 0))
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return nil, nil, 0, syscall.EIO
	}
	rel := n.rel(name)
	_, existed := os.Lstat(filepath.Join(n.fs.backing, rel))
	in, fh, ff, e := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	fh = wrap(fh)
	if e == 0 && existed != nil {
		n.fs.journal = append(n.fs.journal, nameOp{kind: opCreate, path: rel})
	}
	return in, fh, ff, e
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return nil, syscall.EIO
	}
	in, e := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if e == 0 {
		n.fs.journal = append(n.fs.journal, nameOp{kind: opCreate, dir: true, path: n.rel(name)})
	}
	return in, e
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return syscall.EIO
	}
	rel := n.rel(name)
	if fi, err := os.Lstat(filepath.Join(n.fs.backing, rel)); err != nil {
		return gofs.ToErrno(err)
	} else if fi.IsDir() {
		return syscall.EISDIR
	}
	t, err := n.fs.trashLocked(rel)
	if err != nil {
		return gofs.ToErrno(err)
	}
	n.fs.journal = append(n.fs.journal, nameOp{kind: opUnlink, path: rel, trash: t})
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return syscall.EIO
	}
	e := n.LoopbackNode.Rmdir(ctx, name)
	if e == 0 {
		n.fs.journal = append(n.fs.journal, nameOp{kind: opUnlink, dir: true, path: n.rel(name)})
	}
	return e
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE / NOREPLACE: not modelled
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.cut {
		return syscall.EIO
	}
	from, to := n.rel(name), np.rel(newName)
	if _, err := os.Lstat(filepath.Join(n.fs.backing, from)); err != nil {
		return gofs.ToErrno(err)
	}
	op := nameOp{kind: opRename, path: from, to: to}
	if fi, err := os.Lstat(filepath.Join(n.fs.backing, to)); err == nil {
		if fi.IsDir() {
			return syscall.EISDIR // replacing a directory: not modelled
		}
		t, err := n.fs.trashLocked(to)
		if err != nil {
			return gofs.ToErrno(err)
		}
		op.trash = t
	}
	if err := os.Rename(filepath.Join(n.fs.backing, from), filepath.Join(n.fs.backing, to)); err != nil {
		if op.trash != "" {
			os.Rename(filepath.Join(n.fs.backing, op.trash), filepath.Join(n.fs.backing, to))
		}
		return gofs.ToErrno(err)
	}
	n.fs.journal = append(n.fs.journal, op)
	return 0
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut, size, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// OpendirHandle wraps the loopback directory stream so that an fsync of a directory
// reaches Fsync above.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, ff, e := n.LoopbackNode.OpendirHandle(ctx, flags)
	if e != 0 {
		return fh, ff, e
	}
	return &dirHandle{inner: fh, n: n}, ff, 0
}

type dirHandle struct {
	inner gofs.FileHandle
	n     *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	for {
		e, errno := d.inner.(gofs.FileReaddirenter).Readdirent(ctx)
		if e != nil && e.Name == trashDir && d.n.IsRoot() {
			continue
		}
		return e, errno
	}
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(gofs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(gofs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.Fsync(ctx, nil, flags)
}
