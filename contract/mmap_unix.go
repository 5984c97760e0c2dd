//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package contract

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// mapFile maps f, a regular file, from its current offset to its end,
// read-only; release unmaps it.
func mapFile(f *os.File) ([]byte, func(), error) {
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, nil, err
	}
	size := info.Size()
	if size <= off {
		return nil, func() {}, nil
	}
	if int64(int(size)) != size {
		return nil, nil, errors.New("file too large to map")
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b[off:], func() { _ = syscall.Munmap(b) }, nil
}

// spool copies r in bounded chunks to an unnamed temporary file and maps
// it, so that a stream is checked without being held on the heap.
func spool(r io.Reader) ([]byte, func(), error) {
	f, err := os.CreateTemp("", "answer-*")
	if err != nil {
		return nil, nil, err
	}
	_ = os.Remove(f.Name()) // unnamed: nothing is left behind
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	b, release, err := mapFile(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return b, func() { release(); f.Close() }, nil
}
