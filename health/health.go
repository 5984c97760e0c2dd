// Package health tells whether a servicegate app can serve, for load
// balancers' probes and operators: whether its descriptor was read (or
// only its last good copy), whether Redis answers, whether each webhook
// queue can store a delivery, and how deep the queues are. It knows
// nothing of Caddy: its Checker takes each part as a value, and a part it
// is not given is not checked.
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
	// copy is in use. The app can serve, with routes that may be old.
	DescriptorLastGood = "last_good"
	// DescriptorNotRead: no descriptor has been read yet. The app cannot
	// serve.
	DescriptorNotRead = "not_read"
)

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
	// Redis server (host:port, no credentials) and keys.
	Where string
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
	// Redis pings the Redis server the instances share; RedisAddress
	// names it (host:port, never a URL with its password).
	Redis        func(ctx context.Context) error
	RedisAddress string
	// Queues returns the app's webhook queues.
	Queues func() []Queue
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Report is what a check found. Its JSON is the answer of the health
// endpoint.
type Report struct {
	// Status is "ok" when the app can serve, "unavailable" when it
	// cannot.
	Status string `json:"status"`
	// Reason says why it cannot serve, for the person reading the probe.
	Reason string `json:"reason,omitempty"`
	// Checks holds the state of each part.
	Checks Checks `json:"checks"`
}

// Checks is the state of each part of an app.
type Checks struct {
	Descriptor *DescriptorCheck `json:"descriptor,omitempty"`
	Redis      *RedisCheck      `json:"redis,omitempty"`
	Queues     []QueueCheck     `json:"queues,omitempty"`
}

// DescriptorCheck is the descriptor's part of a Report.
type DescriptorCheck struct {
	State string `json:"state"`
	// AgeSeconds is how long ago the copy in use was read.
	AgeSeconds *float64 `json:"age_seconds,omitempty"`
}

// RedisCheck is Redis's part of a Report.
type RedisCheck struct {
	State   string `json:"state"` // "ok" or "unreachable"
	Address string `json:"address,omitempty"`
	Error   string `json:"error,omitempty"`
}

// QueueCheck is one queue's part of a Report.
type QueueCheck struct {
	Where            string  `json:"where"`
	Writable         bool    `json:"writable"`
	Error            string  `json:"error,omitempty"`
	Depth            int     `json:"depth"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// The values of Report.Status.
const (
	StatusOK          = "ok"
	StatusUnavailable = "unavailable"
)

// OK reports whether the app can serve.
func (r *Report) OK() bool { return r.Status == StatusOK }

// HTTPStatus is the status a probe gets: 200 when the app can serve, 503
// when it cannot.
func (r *Report) HTTPStatus() int {
	if r.OK() {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

// Check checks every part given and reports.
func (c *Checker) Check(ctx context.Context) Report {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	var reasons []string
	var rep Report
	if c.Descriptor != nil {
		d := c.Descriptor()
		dc := &DescriptorCheck{State: d.State}
		if !d.At.IsZero() {
			age := seconds(now().Sub(d.At))
			dc.AgeSeconds = &age
		}
		if d.State != DescriptorRead && d.State != DescriptorLastGood {
			reasons = append(reasons, "the app descriptor has not been read yet")
		}
		rep.Checks.Descriptor = dc
	}
	if c.Redis != nil {
		rc := &RedisCheck{State: "ok", Address: c.RedisAddress}
		if err := c.Redis(ctx); err != nil {
			rc.State, rc.Error = "unreachable", err.Error()
			reasons = append(reasons, "Redis does not answer")
		}
		rep.Checks.Redis = rc
	}
	if c.Queues != nil {
		for _, q := range c.Queues() {
			qc := QueueCheck{Where: q.Where, Writable: true, Depth: q.Depth}
			if !q.Oldest.IsZero() {
				qc.OldestAgeSeconds = seconds(now().Sub(q.Oldest))
			}
			if q.Writable != nil {
				if err := q.Writable(ctx); err != nil {
					qc.Writable, qc.Error = false, err.Error()
					reasons = append(reasons, fmt.Sprintf("the webhook queue %s cannot store deliveries", q.Where))
				}
			}
			rep.Checks.Queues = append(rep.Checks.Queues, qc)
		}
	}
	rep.Status = StatusOK
	if len(reasons) > 0 {
		rep.Status, rep.Reason = StatusUnavailable, strings.Join(reasons, "; ")
	}
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
