// Package health tells whether a servicegate app can serve, for load
// balancers' probes and operators: whether its descriptor was read (or
// only its last good copy), whether Redis answers, whether each webhook
// queue can store a delivery, whether its installation store can be read.
// It knows nothing of Caddy: its Checker takes each part as a value, and a
// part it is not given is not checked.
//
// Each part's state has an effect on the app. A part every instance
// shares (Redis, the app that serves the descriptor) whose outage leaves
// the instance answering what its configuration needs makes the app
// degraded, answered 200: every instance is in the same state, and a load
// balancer that took them out would drop the whole fleet for nothing. A
// part without which the instance cannot answer (no descriptor, a webhook
// queue that cannot store a delivery) makes it unavailable, answered 503.
//
// What anyone may read (Report.Public) names each part and its state;
// where each part is, what failed and how deep the queues are is for the
// operator (the Report itself, on the admin API).
package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// The states of a descriptor.
const (
	// DescriptorRead: the descriptor was read from its source.
	DescriptorRead = "read"
	// DescriptorLastGood: the source could not be read; the last good
	// copy is in use. The app serves, with routes that may be old:
	// degraded.
	DescriptorLastGood = "last_good"
	// DescriptorNotRead: no descriptor has been read yet. The app cannot
	// serve.
	DescriptorNotRead = "not_read"
)

// The states of the other parts.
const (
	// StateOK: the part works.
	StateOK = "ok"
	// StateUnreachable: the Redis the part is kept in does not answer.
	StateUnreachable = "unreachable"
	// StateNotWritable: a disk queue's directory does not take a new
	// file.
	StateNotWritable = "not_writable"
)

// The names of the parts, as a Report names its checks.
const (
	PartDescriptor    = "descriptor"
	PartRedis         = "redis"
	PartQueue         = "webhook_queue"
	PartInstallations = "installations"
)

// The values of Report.Status and Check.Status, from best to worst.
const (
	// StatusOK: every part works.
	StatusOK = "ok"
	// StatusDegraded: a part shared by every instance is out, and the
	// instance still answers what its configuration needs (some requests
	// get 503 with Retry-After). Answered 200.
	StatusDegraded = "degraded"
	// StatusUnavailable: the instance cannot answer what its
	// configuration needs. Answered 503.
	StatusUnavailable = "unavailable"
)

// worse reports whether status a is worse than b.
func worse(a, b string) bool { return rank(a) > rank(b) }

func rank(status string) int {
	switch status {
	case StatusOK:
		return 0
	case StatusDegraded:
		return 1
	}
	return 2
}

// Descriptor is the state of an app's descriptor.
type Descriptor struct {
	// State is DescriptorRead, DescriptorLastGood or DescriptorNotRead.
	State string
	// At is when the copy in use was read; zero when none is.
	At time.Time
}

// Queue is one webhook queue of the app.
type Queue struct {
	// Where names the queue as its metrics do: its directory, or its
	// Redis (in words, no credentials) and keys.
	Where string
	// Shared is set for a queue kept in Redis: Writable is then Redis'
	// ping, which the Checker's own Redis ping stands for when it has one.
	Shared bool
	// Depth counts the deliveries waiting or in flight.
	Depth int
	// Oldest is when the oldest of them was received; zero when none.
	Oldest time.Time
	// Writable, when set, reports whether the queue can store a delivery
	// now (nil error: it can).
	Writable func(ctx context.Context) error
}

// Checker checks the parts of one app. Every field is optional: a part
// that is not given is neither checked nor shown.
type Checker struct {
	// Descriptor returns the state of the app's descriptor. It is a
	// function so that a descriptor read after the start (or read again)
	// is seen as it is at each check.
	Descriptor func() Descriptor
	// Redis pings the Redis server the instances share (subscription
	// answers, sessions, spilled answers); RedisAddress names it (in
	// words, never a URL with its password).
	Redis        func(ctx context.Context) error
	RedisAddress string
	// Queues returns the app's webhook queues.
	Queues func() []Queue
	// Installations reports whether the app's installation store can be
	// read now (nil error: it can); InstallationsWhere names the store.
	// The instance answers installed organizations from its own copy
	// while a store in Redis is away.
	Installations      func(ctx context.Context) error
	InstallationsWhere string
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Report is what a check found, in full: the admin API's answer. Public
// is what the app's health path answers.
type Report struct {
	// Status is StatusOK, StatusDegraded or StatusUnavailable: the worst
	// of the checks'.
	Status string `json:"status"`
	// Reason says what is wrong, for the operator.
	Reason string `json:"reason,omitempty"`
	// Checks holds the state of each part.
	Checks []Check `json:"checks"`
}

// Check is one part's part of a Report.
type Check struct {
	// Name is one of the Part names.
	Name string `json:"name"`
	// State is the part's state: a Descriptor state, or StateOK,
	// StateUnreachable, StateNotWritable.
	State string `json:"state"`
	// Status is what the state does to the app.
	Status string `json:"status"`
	// Address names the Redis server pinged.
	Address string `json:"address,omitempty"`
	// Where names a queue or a store.
	Where string `json:"where,omitempty"`
	// Error is what failed.
	Error string `json:"error,omitempty"`
	// AgeSeconds is how long ago the descriptor in use was read.
	AgeSeconds *float64 `json:"age_seconds,omitempty"`
	// Depth and OldestAgeSeconds are a queue's deliveries waiting or in
	// flight, and the age of the oldest of them.
	Depth            *int     `json:"depth,omitempty"`
	OldestAgeSeconds *float64 `json:"oldest_age_seconds,omitempty"`
}

// Public is a Report as anyone may read it: the status, and each part's
// name and state, without where it is, what failed or how deep a queue
// is.
type Public struct {
	Status string        `json:"status"`
	Checks []PublicCheck `json:"checks"`
}

// PublicCheck is one part of a Public report.
type PublicCheck struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// Public is the report as the app's health path answers it. A part
// checked several times (two webhook queues) shows once, in the state of
// the worse.
func (r *Report) Public() Public {
	out := Public{Status: r.Status, Checks: []PublicCheck{}}
	at := map[string]int{}
	status := make([]string, 0, len(r.Checks))
	for _, c := range r.Checks {
		i, seen := at[c.Name]
		if !seen {
			at[c.Name] = len(out.Checks)
			out.Checks = append(out.Checks, PublicCheck{Name: c.Name, State: c.State})
			status = append(status, c.Status)
			continue
		}
		if worse(c.Status, status[i]) {
			out.Checks[i].State, status[i] = c.State, c.Status
		}
	}
	return out
}

// HTTPStatus is the status a probe gets: 503 when the app is
// unavailable, else 200.
func (r *Report) HTTPStatus() int { return httpStatus(r.Status) }

func httpStatus(status string) int {
	if status == StatusUnavailable {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// Check checks every part given and reports.
func (c *Checker) Check(ctx context.Context) Report {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	rep := Report{Status: StatusOK, Checks: []Check{}}
	var reasons []string
	add := func(ch Check, reason string) {
		rep.Checks = append(rep.Checks, ch)
		if ch.Status != StatusOK {
			reasons = append(reasons, reason)
		}
		if worse(ch.Status, rep.Status) {
			rep.Status = ch.Status
		}
	}
	if c.Descriptor != nil {
		d := c.Descriptor()
		ch := Check{Name: PartDescriptor, State: d.State, Status: StatusOK}
		if !d.At.IsZero() {
			age := seconds(now().Sub(d.At))
			ch.AgeSeconds = &age
		}
		reason := ""
		switch d.State {
		case DescriptorRead:
		case DescriptorLastGood:
			ch.Status, reason = StatusDegraded, "the app did not answer its descriptor: its last good copy serves"
		default:
			ch.Status, reason = StatusUnavailable, "the app descriptor has not been read yet"
		}
		add(ch, reason)
	}
	var redisErr error
	if c.Redis != nil {
		ch := Check{Name: PartRedis, State: StateOK, Status: StatusOK, Address: c.RedisAddress}
		if redisErr = c.Redis(ctx); redisErr != nil {
			ch.State, ch.Status, ch.Error = StateUnreachable, StatusDegraded, redisErr.Error()
		}
		add(ch, "Redis does not answer")
	}
	if c.Queues != nil {
		for _, q := range c.Queues() {
			depth, age := q.Depth, 0.0
			if !q.Oldest.IsZero() {
				age = seconds(now().Sub(q.Oldest))
			}
			ch := Check{Name: PartQueue, State: StateOK, Status: StatusOK, Where: q.Where, Depth: &depth, OldestAgeSeconds: &age}
			writable := q.Writable
			if q.Shared && c.Redis != nil {
				// Redis was just pinged: one ping per check.
				writable = func(context.Context) error { return redisErr }
			}
			if writable != nil {
				if err := writable(ctx); err != nil {
					ch.State, ch.Status, ch.Error = StateNotWritable, StatusUnavailable, err.Error()
					if q.Shared {
						ch.State = StateUnreachable
					}
				}
			}
			add(ch, fmt.Sprintf("the webhook queue %s cannot store deliveries", q.Where))
		}
	}
	if c.Installations != nil {
		ch := Check{Name: PartInstallations, State: StateOK, Status: StatusOK, Where: c.InstallationsWhere}
		if err := c.Installations(ctx); err != nil {
			ch.State, ch.Status, ch.Error = StateUnreachable, StatusDegraded, err.Error()
		}
		add(ch, "the installation store cannot be read: installed organizations are answered from this instance's copy")
	}
	rep.Reason = strings.Join(reasons, "; ")
	return rep
}

// seconds rounds d to milliseconds, in seconds: enough for a probe.
func seconds(d time.Duration) float64 {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Millisecond).Seconds()
}

// DirWritable reports whether a file can be created in dir now: it
// creates one and removes it. A disk queue whose directory is read-only
// or full cannot store a delivery.
func DirWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".health-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot create a file in %s: %w", dir, pe.Err)
		}
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}
