package caddymodule

import (
	"errors"
	"testing"
)

// TestStoresStartOpensAtStartOnce: an added store opens at Start, or at
// its first use before it, and only once; one added while Start runs (a
// handler loaded by an open) opens at once, without waiting on Start; a
// store that fails fails Start; a nil StoresStart (no config) opens at
// once.
func TestStoresStartOpensAtStartOnce(t *testing.T) {
	s := new(StoresStart)
	var opened []string
	first, err := s.opening(func() error { opened = append(opened, "first"); return nil })
	if err != nil || len(opened) != 0 {
		t.Fatalf("opened before the start: %v %v", opened, err)
	}
	used, _ := s.opening(func() error { opened = append(opened, "used"); return nil })
	if err := used(); err != nil || len(opened) != 1 || opened[0] != "used" {
		t.Fatalf("first use before the start: %v %v", opened, err)
	}
	broken := errors.New("the file is locked")
	_, _ = s.opening(func() error {
		// A handler loaded as the routes are made adds its own store.
		_, err := s.opening(func() error { opened = append(opened, "nested"); return nil })
		opened = append(opened, "routes")
		return err
	})
	_, _ = s.opening(func() error { return broken })
	if err := s.Start(); !errors.Is(err, broken) {
		t.Fatalf("Start: %v, want the failed store's error", err)
	}
	if want := []string{"used", "first", "nested", "routes"}; len(opened) != len(want) || opened[1] != "first" || opened[2] != "nested" || opened[3] != "routes" {
		t.Fatalf("opened %v, want %v", opened, want)
	}
	if err := first(); err != nil || len(opened) != 4 {
		t.Fatalf("opened again: %v %v", opened, err)
	}
	if err := s.Start(); !errors.Is(err, broken) {
		t.Fatalf("Start again: %v", err)
	}
	var none *StoresStart
	if _, err := none.opening(func() error { return broken }); !errors.Is(err, broken) {
		t.Fatalf("without a config: %v, want the store opened at once", err)
	}
}
