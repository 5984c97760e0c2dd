package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinning keeps each side's Caddy on a core of its own: the last of the
// cores this process may use. Everything else the bench runs (itself,
// wrk, the upstream, Redis) stays on the others, which its children
// inherit. Caddy then shares its core with nothing the bench runs, so its
// CPU time per request moves less with what the load generators do.
type pinning struct {
	caddy  unix.CPUSet // Caddy's core
	others unix.CPUSet // the rest
	n      int         // how many cores the rest are
}

// pin moves this process to all but the last of its cores and returns the
// pinning; a machine with fewer than two cores cannot be pinned.
func pin() (*pinning, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("-pin: reading this process's cores: %w", err)
	}
	var cpus []int
	for c := 0; c < len(all)*64 && len(cpus) < all.Count(); c++ {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("-pin needs at least 2 cores, this process may use %d", len(cpus))
	}
	p := &pinning{n: len(cpus) - 1}
	p.caddy.Set(cpus[len(cpus)-1])
	for _, c := range cpus[:len(cpus)-1] {
		p.others.Set(c)
	}
	// Every thread of this process: the Go runtime's threads exist
	// already, and a child inherits the mask of the thread that starts it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tids, err := threads()
	if err != nil {
		return nil, err
	}
	for _, tid := range tids {
		if err := unix.SchedSetaffinity(tid, &p.others); err != nil {
			return nil, fmt.Errorf("-pin: moving thread %d: %w", tid, err)
		}
	}
	return p, nil
}

// caddyEnv is what a Caddy started under the pinning is told: one core.
func (p *pinning) caddyEnv() []string { return []string{"GOMAXPROCS=1"} }

// place moves every thread of the Caddy process pid to Caddy's core.
func (p *pinning) place(pid int) error {
	tids, err := threadsOf(pid)
	if err != nil {
		return err
	}
	for _, tid := range tids {
		if err := unix.SchedSetaffinity(tid, &p.caddy); err != nil {
			return fmt.Errorf("-pin: moving Caddy's thread %d: %w", tid, err)
		}
	}
	return nil
}

// threads are this process's thread ids.
func threads() ([]int, error) { return threadsOf(unix.Getpid()) }

// threadsOf lists /proc/<pid>/task.
func threadsOf(pid int) ([]int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("-pin: listing the threads of %d: %w", pid, err)
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
