//go:build unix && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package limits

import "syscall"

// mapAnon maps n bytes of private anonymous memory, readable and
// writable; the system reserves address space only.
func mapAnon(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// unmapAnon unmaps a mapping of mapAnon, given as it was returned.
func unmapAnon(mem []byte) error { return syscall.Munmap(mem) }
