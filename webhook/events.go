package webhook

import (
	"bytes"
	"errors"

	"github.com/servicegate/servicegate/jsonscan"
)

// Reasons a body fails the events check; test with errors.Is.
var (
	// ErrNotJSON means the body is not JSON.
	ErrNotJSON = errors.New("webhook: the delivery is not JSON")
	// ErrTooDeep means the body nests arrays and objects deeper than
	// MaxDepth.
	ErrTooDeep = errors.New("webhook: the delivery is nested too deeply")
	// ErrShape means the body is JSON but not {"events":[{"event":"…"},…]}.
	ErrShape = errors.New(`webhook: the delivery is not {"events":[{"event":"…"},…]}`)
	// ErrDuplicateKey means a repeated "events" or "event" key: the
	// app's JSON library might read the other one.
	ErrDuplicateKey = errors.New(`webhook: a repeated "events" or "event" key`)
	// ErrKeyCase means a key that differs from "events" or "event" only
	// by case (as Unicode folds it): encoding/json, and other libraries,
	// match keys without regard to case and might read it instead.
	ErrKeyCase = errors.New(`webhook: a key that differs from "events" or "event" only by case`)
	// ErrEventNotAllowed means an event outside the allow-list.
	ErrEventNotAllowed = errors.New("webhook: an event outside the allow-list")
)

// MaxDepth bounds the nesting the events check follows, and with it the
// stack a hostile body can make it use.
const MaxDepth = 512

var (
	eventsKey = []byte("events")
	eventKey  = []byte("event")
)

// Events is an allow-list of event names.
type Events struct {
	names map[string]struct{}
	given []string
}

// NewEvents returns the allow-list of names.
func NewEvents(names ...string) *Events {
	e := &Events{names: make(map[string]struct{}, len(names)), given: names}
	for _, n := range names {
		e.names[n] = struct{}{}
	}
	return e
}

// Names returns the names of the list as NewEvents was given them; a nil
// list has none.
func (e *Events) Names() []string {
	if e == nil {
		return nil
	}
	return e.given
}

// Check checks that body is a delivery whose events are all in the list:
// nil, or one of the errors above.
func (e *Events) Check(body []byte) error {
	allowed, err := ScanEvents(body, func(name []byte) bool {
		_, ok := e.names[string(name)]
		return ok
	})
	if err == nil && !allowed {
		err = ErrEventNotAllowed
	}
	return err
}

// ScanEvents checks that body is JSON of the form
// {"events":[{"event":"<name>",…},…],…} with at least one event (else an
// error), and calls allow with each name, as the app's JSON library reads
// it (escapes decoded, invalid UTF-8 as U+FFFD), until it returns false,
// which makes the result false. Keys match exactly, as the app reads
// them; a repeated "events" or "event" key, or one that differs from
// them only by case, is refused. The body is checked to its end either
// way, in one pass; only a name or key holding escapes is copied.
func ScanEvents(body []byte, allow func(name []byte) bool) (allowed bool, err error) {
	s := jsonscan.Scanner{MaxDepth: MaxDepth}
	s.Reset(body)
	if s.Peek() != '{' {
		if err := s.Skip(); err != nil {
			return false, scanError(err)
		}
		return false, ErrShape
	}
	seen, count, stopped := false, 0, false
	err = s.Object(func(key []byte) error {
		if string(key) != "events" {
			if bytes.EqualFold(key, eventsKey) {
				return ErrKeyCase
			}
			return s.Skip()
		}
		if seen {
			return ErrDuplicateKey
		}
		seen = true
		if s.Peek() != '[' {
			if err := s.Skip(); err != nil {
				return err
			}
			return ErrShape
		}
		return s.Array(func() error {
			if s.Peek() != '{' {
				if err := s.Skip(); err != nil {
					return err
				}
				return ErrShape
			}
			hasName := false
			err := s.Object(func(key []byte) error {
				if string(key) != "event" {
					if bytes.EqualFold(key, eventKey) {
						return ErrKeyCase
					}
					return s.Skip()
				}
				if hasName {
					return ErrDuplicateKey
				}
				hasName = true
				if s.Peek() != '"' {
					if err := s.Skip(); err != nil {
						return err
					}
					return ErrShape
				}
				// The name is used before the next key is read, which may
				// reuse its memory; a later error overrides the result.
				name, err := s.String()
				if err == nil && !stopped && !allow(name) {
					stopped = true
				}
				return err
			})
			if err != nil {
				return err
			}
			if !hasName {
				return ErrShape
			}
			count++
			return nil
		})
	})
	if err == nil {
		err = s.Finish()
	}
	switch {
	case err != nil:
		return false, scanError(err)
	case !seen || count == 0:
		return false, ErrShape
	case stopped:
		return false, nil
	}
	return true, nil
}

// scanError maps the scanner's errors onto the package's.
func scanError(err error) error {
	switch err {
	case jsonscan.ErrSyntax:
		return ErrNotJSON
	case jsonscan.ErrTooDeep:
		return ErrTooDeep
	}
	return err
}
