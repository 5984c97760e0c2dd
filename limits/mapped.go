package limits

import (
	"runtime"
	"sync"
	"sync/atomic"
)

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
	// maxMappedInUse bounds the bytes of the mappings in use (reserved,
	// written or not): past it, buffers are heap memory. A body that nobody
	// closes (reverse_proxy's transport leaves one it never read open, when
	// the app cannot be reached) is given back by the garbage collector,
	// which memory outside the heap does not prompt to run; heap buffers
	// past this bound do.
	maxMappedInUse = 512 << 20
	// maxSpare is the most memory (bytes written) that mappings no longer
	// used keep for the next buffers. A page written for the first time
	// costs far more than the write: about 10 µs per 4 KiB page on a
	// virtual machine whose host takes freed memory back (14 ms for 5 MB,
	// against 0.3 ms for heap memory the Go runtime already holds). So a
	// few mappings are kept, as pooled heap buffers are; the rest go back
	// to the system at once.
	maxSpare = 16 << 20
)

// spare holds mappings no longer used, for the next buffers.
var spare struct {
	sync.Mutex
	maps  [][]byte // whole mappings
	used  []int    // how much of each was written
	bytes int      // the sum of used
}

// mapAnonymous maps memory; tests replace it, and set noSpares to keep
// the spares out of a test.
var (
	mapAnonymous = mapAnon
	noSpares     bool
)

// liveMappings counts the mappings alive, spares included; inUse those
// held by an owner, and inUseBytes their sizes.
var liveMappings, inUse, inUseBytes atomic.Int64

// MappingsInUse is the number of buffers (of Body and ResponseBuffer) held
// in memory mappings now; spares are not counted.
func MappingsInUse() int64 { return inUse.Load() }

// mapping is a buffer of mapBuffer held by an owner (a Body, a
// ResponseBuffer).
type mapping struct {
	mem     []byte // the whole mapping
	touched int    // how much of it may have been written
	cleanup runtime.Cleanup
}

// newMapping returns a mapping of at least n bytes for owner, nil when
// there is none to be had. It is given back with release, or by the
// garbage collector once owner is unreachable.
func newMapping[T any](owner *T, n int) *mapping {
	if inUseBytes.Add(int64(n)) > maxMappedInUse {
		inUseBytes.Add(-int64(n))
		return nil
	}
	mem, touched := mapBuffer(n)
	if mem == nil {
		inUseBytes.Add(-int64(n))
		return nil
	}
	inUseBytes.Add(int64(cap(mem) - n))
	m := &mapping{mem: mem, touched: touched}
	m.cleanup = runtime.AddCleanup(owner, dropMapping, m)
	inUse.Add(1)
	return m
}

// release gives m back; written is how much of it was written. Nothing may
// use m after.
func (m *mapping) release(written int) {
	m.cleanup.Stop()
	inUse.Add(-1)
	inUseBytes.Add(-int64(cap(m.mem)))
	unmapBuffer(m.mem, max(m.touched, written))
}

// dropMapping is the GC cleanup of an owner dropped with its mapping: all
// of it may have been written.
func dropMapping(m *mapping) {
	inUse.Add(-1)
	inUseBytes.Add(-int64(cap(m.mem)))
	unmapBuffer(m.mem, cap(m.mem))
}

// mapBuffer returns a mapped buffer of at least n bytes (n > 0), or nil
// when there is no mapping to be had: the system has none, too many are
// alive, or the system refused. A spare mapping is taken when one is large
// enough; it holds what it held before, as a pooled heap buffer does. The
// buffer is given back with unmapBuffer, as it was returned. touched is
// how much of it was written before.
func mapBuffer(n int) (mem []byte, touched int) {
	if n <= 0 {
		return nil, 0
	}
	if !noSpares {
		if mem, touched := takeSpare(n); mem != nil {
			return mem, touched
		}
	}
	if liveMappings.Add(1) > maxMappings {
		liveMappings.Add(-1)
		return nil, 0
	}
	mem, err := mapAnonymous(n)
	if err != nil || mem == nil {
		liveMappings.Add(-1)
		return nil, 0
	}
	return mem, 0
}

// takeSpare takes the smallest spare mapping of at least n bytes, nil when
// there is none, and how much of it was written.
func takeSpare(n int) ([]byte, int) {
	spare.Lock()
	defer spare.Unlock()
	best := -1
	for i, m := range spare.maps {
		if cap(m) >= n && (best < 0 || cap(m) < cap(spare.maps[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil, 0
	}
	mem, touched := spare.maps[best], spare.used[best]
	spare.bytes -= touched
	last := len(spare.maps) - 1
	spare.maps[best], spare.used[best] = spare.maps[last], spare.used[last]
	spare.maps[last] = nil
	spare.maps, spare.used = spare.maps[:last], spare.used[:last]
	return mem[:cap(mem)], touched
}

// unmapBuffer gives back a buffer of mapBuffer, of which used bytes were
// written: kept as a spare while the spares hold less than maxSpare,
// unmapped otherwise. Nothing may use it after.
func unmapBuffer(mem []byte, used int) {
	if mem == nil {
		return
	}
	used = min(max(used, 0), cap(mem))
	spare.Lock()
	if spare.bytes+used <= maxSpare {
		spare.maps = append(spare.maps, mem)
		spare.used = append(spare.used, used)
		spare.bytes += used
		spare.Unlock()
		return
	}
	spare.Unlock()
	if unmapAnon(mem) == nil {
		liveMappings.Add(-1)
	}
}
