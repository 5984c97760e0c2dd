// Package limits holds the bounded buffering behind servicegate's module
// limits: reading a request body whole within a limit, with memory that
// grows with the bytes received and never with the bytes promised (Body,
// ReadBody), under the read deadline of its connection (ReadRequest),
// buffering an HTTP response up to a limit before any of it is
// sent, in memory (ResponseBuffer) or beyond a size on disk (SpillBuffer),
// and naming sizes and durations for the person who reads a refusal in
// the service's UI. Large bodies and answers are held outside the Go heap,
// in anonymous memory mappings given back as soon as nothing reads them
// (see MinMapped).
//
// It depends on nothing but the standard library.
package limits

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// DefaultMaxSize is the 5 MB limit the service sets on the bodies an app's
// endpoints exchange (module calls each way, webhook deliveries), read as
// 5 MiB.
const DefaultMaxSize = 5 << 20

// ErrTooLarge is returned when a body holds more bytes than its limit.
var ErrTooLarge = errors.New("body larger than the size limit")

// ReadBody appends everything r holds to buf, reading at most max+1 bytes:
// when r holds more than max bytes it stops there and returns ErrTooLarge,
// so a body over the limit costs at most the limit in memory. Read errors
// other than io.EOF are returned as they are.
func ReadBody(buf *bytes.Buffer, r io.Reader, max int64) error {
	if max < 0 {
		max = 0
	}
	// A loop of its own rather than buf.ReadFrom(io.LimitReader(…)):
	// this is the hot path of every request, and it allocates nothing
	// beyond the buffer's growth.
	for {
		room := max + 1 - int64(buf.Len())
		if room <= 0 {
			return ErrTooLarge
		}
		buf.Grow(int(min(room, bytes.MinRead)))
		free := buf.AvailableBuffer()
		free = free[:min(int64(cap(free)), room)]
		n, err := r.Read(free)
		buf.Write(free[:n]) // free is buf's own spare room: this copies nothing
		if err == io.EOF {
			// The byte over the limit may come with io.EOF in one Read.
			if int64(buf.Len()) > max {
				return ErrTooLarge
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// SizeName names a size of n bytes for a person: "900 bytes", "100 KB",
// "6.2 MB", with 1 KB = 1024 bytes as the service counts. It rounds up to
// a tenth of the unit, so a size just over a limit never reads as the limit
// itself; name limits with LimitName.
func SizeName(n int64) string { return nameSize(n, true) }

// LimitName names a size limit of n bytes for a person, like SizeName but rounding
// down: a limit of 5 MiB reads "5 MB".
func LimitName(n int64) string { return nameSize(n, false) }

func nameSize(n int64, up bool) string {
	if n < 0 {
		n = 0
	}
	var unit int64
	var name string
	switch {
	case n >= gib:
		unit, name = gib, " GB"
	case n >= mib:
		unit, name = mib, " MB"
	case n >= kib:
		unit, name = kib, " KB"
	default:
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	// tenths of the unit, rounded in the asked direction
	// (computed from quotient and remainder: n*10 could overflow)
	rest := n % unit * 10
	tenths := n/unit*10 + rest/unit
	if up && rest%unit != 0 {
		tenths++
	}
	s := strconv.FormatInt(tenths/10, 10)
	if f := tenths % 10; f != 0 {
		s += "." + strconv.FormatInt(f, 10)
	}
	return s + name
}

// DurationName names a duration for a person: "2 minutes", "1 minute",
// "90 seconds", and Go's own notation ("300ms", "1m30.5s") for anything
// that is not a whole number of seconds.
func DurationName(d time.Duration) string {
	switch {
	case d > 0 && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	case d > 0 && d%time.Second == 0:
		return plural(int64(d/time.Second), "second")
	default:
		return d.String()
	}
}

func plural(n int64, unit string) string {
	s := strconv.FormatInt(n, 10) + " " + unit
	if n != 1 {
		s += "s"
	}
	return s
}
