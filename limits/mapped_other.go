//go:build !(unix && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64))

package limits

import "errors"

// Elsewhere (and on 32-bit systems, whose address space is too small to
// reserve ahead) there are no mappings: large buffers are heap memory.

func mapAnon(int) ([]byte, error) { return nil, errors.New("no anonymous mappings on this system") }

func unmapAnon([]byte) error { return nil }
