//go:build race

package caddymodule

// raceEnabled: the race detector keeps shadow memory for every byte the
// program touches, so a process built with it holds several times the
// memory it would otherwise.
const raceEnabled = true
