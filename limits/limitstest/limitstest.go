// Package limitstest helps the tests of the packages that read bodies
// into limits' mapped buffers.
package limitstest

import (
	"runtime"
	"testing"
	"time"

	"github.com/servicegate/servicegate/limits"
)

// MappingsBack waits for the mapped buffers in use to come back to want:
// a buffer a transport still sends is given back when it closes it, one
// nobody closed by the garbage collector. The test fails after 10 s.
func MappingsBack(t testing.TB, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for limits.MappingsInUse() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d mapped buffers in use, want %d", limits.MappingsInUse(), want)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}
