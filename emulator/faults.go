package emulator

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Fault is a switch of one of the emulator's own endpoints, so that a
// developer can watch what the gateway does when the service fails: wait
// Delay, then answer Status, or close the connection with no answer
// (Outage). The zero Fault is no fault.
type Fault struct {
	// Status, when set, is the status answered (400 to 599).
	Status int
	// Delay is how long the endpoint waits before it answers (at most
	// MaxFaultDelay).
	Delay time.Duration
	// Outage closes the connection with no answer.
	Outage bool
}

// MaxFaultDelay bounds a fault's delay: the service waits 2 minutes at
// most for anything.
const MaxFaultDelay = 2 * time.Minute

// check says what is wrong with f, for the person who set it.
func (f Fault) check() error {
	switch {
	case f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return fmt.Errorf("a fault's status must be from 400 to 599, not %d", f.Status)
	case f.Delay < 0 || f.Delay > MaxFaultDelay:
		return fmt.Errorf("a fault's delay must be from 0s to %s, not %s", MaxFaultDelay, f.Delay)
	case f.Outage && f.Status != 0:
		return errors.New("an outage closes the connection with no answer: give it without a status")
	case f == Fault{}:
		return errors.New(`a fault needs a status, a delay or "outage": true; null clears it`)
	}
	return nil
}

// Faults are the switches of the token endpoint and the subscription
// query; nil is no fault.
type Faults struct {
	Token        *Fault
	Subscription *Fault
}

// faults holds the Faults of a Server.
type faults struct {
	mu  sync.Mutex
	cur Faults
}

// SetFaults sets the faults of the token endpoint and the subscription
// query (nil: none), for tests and the console.
func (s *Server) SetFaults(f Faults) error {
	for _, one := range []*Fault{f.Token, f.Subscription} {
		if one != nil {
			if err := one.check(); err != nil {
				return err
			}
		}
	}
	s.faults.mu.Lock()
	s.faults.cur = copyFaults(f)
	s.faults.mu.Unlock()
	return nil
}

// Faults returns the faults set.
func (s *Server) Faults() Faults {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return copyFaults(s.faults.cur)
}

func copyFaults(f Faults) Faults {
	out := Faults{}
	if f.Token != nil {
		t := *f.Token
		out.Token = &t
	}
	if f.Subscription != nil {
		t := *f.Subscription
		out.Subscription = &t
	}
	return out
}

// fault applies f to the exchange of r, and reports whether it answered
// (or closed the connection); answer writes the answer of a fault's
// status.
func fault(w http.ResponseWriter, r *http.Request, f *Fault, answer func(status int)) bool {
	if f == nil {
		return false
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return true
		}
	}
	switch {
	case f.Outage:
		n, _ := r.Context().Value(answerNoteKey{}).(*answerNote)
		if n != nil {
			n.outage = true
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if n != nil {
				// Closed once the console has the call, so that a client
				// that sees the connection end finds the call listed.
				n.hijacked = conn
			} else {
				conn.Close()
			}
			return true
		}
		panic(http.ErrAbortHandler) // no hijacking (HTTP/2): the server resets the stream
	case f.Status != 0:
		answer(f.Status)
		return true
	}
	return false
}
