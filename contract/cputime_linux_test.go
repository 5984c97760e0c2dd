package contract

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time the calling thread has used, and true: on
// a machine shared with other work it leaves out the time the thread was
// waiting for a core, which the wall clock counts. The caller locks its
// goroutine to its thread.
func threadCPU() (time.Duration, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
