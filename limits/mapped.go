package limits

import "sync/atomic"

// Large buffers live outside the Go heap, in anonymous memory mappings,
// where the system has them (Unix; elsewhere they are ordinary heap
// memory). A mapping of n bytes reserves address space only: its pages
// become resident as they are written, so a buffer can be sized once to a
// declared length and still hold memory only for the bytes received. Its
// memory goes back to the system the moment it is unmapped: no garbage,
// no collector headroom. An access to a mapping after it is unmapped
// kills the process, so a mapped buffer is unmapped only once nothing can
// read it (see Body and ResponseBuffer), and a GC cleanup unmaps one whose
// owner is dropped without being done.

const (
	// MinMapped is the smallest buffer kept in a mapping; smaller ones
	// are heap memory, pooled up to MaxPooled.
	MinMapped = 256 << 10
	// maxReserve is the most address space a buffer of unknown final
	// size reserves at once; past it, it is moved to a mapping four
	// times as large.
	maxReserve = 64 << 20
	// maxSizedOnce is the largest declared length a body is mapped to at
	// once; a larger one grows in mappings as its bytes arrive.
	maxSizedOnce = 1 << 30
	// maxMappings bounds the mappings alive at once, far below the
	// system's limit on mappings per process (vm.max_map_count, 65530 by
	// default), which the Go runtime needs too: past it, buffers are heap
	// memory.
	maxMappings = 8192
)

// mapAnonymous maps memory; tests replace it.
var mapAnonymous = mapAnon

// liveMappings counts the mappings alive.
var liveMappings atomic.Int64

// Mappings is the number of buffers currently held in memory mappings.
func Mappings() int64 { return liveMappings.Load() }

// mapBuffer returns a new mapped buffer of n bytes (n > 0), zeroed, or
// nil when there is no mapping to be had: the system has none, too many
// are alive, or the system refused. The buffer is released with
// unmapBuffer, given exactly the slice returned.
func mapBuffer(n int) []byte {
	if n <= 0 || liveMappings.Add(1) > maxMappings {
		liveMappings.Add(-1)
		return nil
	}
	mem, err := mapAnonymous(n)
	if err != nil || mem == nil {
		liveMappings.Add(-1)
		return nil
	}
	return mem
}

// unmapBuffer releases a buffer of mapBuffer. Nothing may use it after.
func unmapBuffer(mem []byte) {
	if mem == nil {
		return
	}
	if unmapAnon(mem) == nil {
		liveMappings.Add(-1)
	}
}

// unmapCleanup is the GC cleanup of an owner dropped with its mapping.
func unmapCleanup(mem []byte) { unmapBuffer(mem) }
