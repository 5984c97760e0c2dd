package caddymodule

import (
	"errors"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(new(StoresStart))
}

// StoresStart is the Caddy app that opens the stores on disk of the
// config's handlers (service_app's installations, the webhook queue) when
// the config starts, rather than when it is provisioned: `caddy validate`
// provisions a config without starting it, and must not wait on the lock
// that a running Caddy holds on the same files. Handlers load it
// themselves; it has no configuration. A handler that serves a request
// before the app's Start opens its store then, once.
type StoresStart struct {
	mu      sync.Mutex
	opens   []func() error
	started bool

	startOnce sync.Once
	startErr  error
}

// CaddyModule returns the Caddy module information.
func (*StoresStart) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "servicegate_stores",
		New: func() caddy.Module { return new(StoresStart) },
	}
}

// storesStart is the config's StoresStart; nil for a context made
// without a config (caddy.NewContext of a bare Context, as tests and
// tools make), which is never started: its stores open at once.
func storesStart(ctx caddy.Context) (*StoresStart, error) {
	if !hasConfig(ctx) {
		return nil, nil
	}
	v, err := ctx.App("servicegate_stores")
	if err != nil {
		return nil, err
	}
	return v.(*StoresStart), nil
}

// opening returns open made to run once: at the config's start, or at the
// first call of what it returns, whichever comes first. An open added
// once the config has started, or to a nil StoresStart (no config to
// start), runs at once, and its error is returned.
func (s *StoresStart) opening(open func() error) (func() error, error) {
	once := sync.OnceValue(open)
	if s != nil {
		s.mu.Lock()
		started := s.started
		if !started {
			s.opens = append(s.opens, once)
		}
		s.mu.Unlock()
		if !started {
			return once, nil
		}
	}
	// Outside the lock: an open may load handlers that add their own.
	return once, once()
}

// Start opens every store added, once, and fails the config's start with
// their errors: a store that cannot be opened is a config that cannot
// run. A handler that serves a request before Caddy starts this app calls
// it too; stores added while it runs open at once.
func (s *StoresStart) Start() error {
	s.startOnce.Do(func() {
		s.mu.Lock()
		s.started = true
		opens := s.opens
		s.opens = nil
		s.mu.Unlock()
		var errs []error
		for _, open := range opens {
			errs = append(errs, open())
		}
		s.startErr = errors.Join(errs...)
	})
	return s.startErr
}

// Stop does nothing: the handlers close their stores at Cleanup.
func (s *StoresStart) Stop() error { return nil }

// Interface guard.
var _ caddy.App = (*StoresStart)(nil)
