package cluster

import "syscall"

// syscallZero is the signal that only asks whether a process exists.
const syscallZero = syscall.Signal(0)
