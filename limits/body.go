package limits

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// Body is a request body read whole into memory, within a size limit, and
// handed on as the request's Body (an io.ReadCloser) to the handlers after
// the one that read it.
//
// Its memory grows with the bytes received, never with the bytes promised.
// A body whose declared length (Content-Length, within the limit) is at
// least MinMapped bytes gets a buffer of that length (plus one byte, to see
// the end) at once, in a memory mapping (see MinMapped): sized once and
// never copied, while only the pages written become resident, so a client
// that declares 5 MB and sends 1 byte costs one page. Other bodies start in
// a heap buffer of 4 KiB at most (a pooled one, memory already held, is
// used as it is) that grows fourfold as it fills, never past the declared
// length plus one while the client keeps its word, and moves to a mapping
// once it would reach MinMapped (a body of unknown length reserves up to
// its limit there, 64 MiB at most at a time).
//
// The buffer is given back once both the handler that read the body is
// done (Release) and the body is closed (Close): net/http's transport may
// still be sending the body from its own goroutine after the response came
// back, and closes it when done. A heap buffer of at most MaxPooled bytes
// goes back to a pool for the next body, larger ones to the garbage
// collector; a mapping is unmapped, its memory back to the system at once.
// A Body dropped without both (a handler after this one that neither reads
// nor closes it) has its mapping unmapped by the garbage collector once
// the Body is unreachable. A Body is never reused: a late call on an old
// one cannot touch a newer body.
type Body struct {
	mu     sync.Mutex
	pooled *[]byte  // the pool's handle of buf; nil once returned, or when buf is mapped
	mapped *mapping // the mapping buf lies in, nil when buf is heap memory
	buf    []byte
	r      bytes.Reader
	closed bool // the reader is done
	done   bool // the handler is done
}

const (
	// MaxPooled is the largest buffer kept in the pool for the next body.
	MaxPooled = 128 << 10
	// firstBuffer is the most a body allocates before its bytes arrive.
	firstBuffer = 4 << 10
	// growth is how much a full buffer grows: four times, so that a 5 MB
	// body is copied six times on its way in rather than eleven.
	growth = 4
)

var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// buffers is where a Body takes its buffer from and returns it to; tests
// replace it to see what is kept.
var buffers interface {
	Get() any
	Put(any)
} = &bodyBuffers

// ReadAll reads src whole into a new Body. declared is the length the
// sender announced, -1 when it announced none; it bounds the growth of
// the buffer, never its first size. A src holding more than limit bytes
// stops the reading with ErrTooLarge, as does an *http.MaxBytesError
// from src; other read errors are returned as they are. On error no Body
// is returned and nothing is left to release. A nil src reads as empty.
func ReadAll(src io.Reader, declared, limit int64) (*Body, error) {
	return ReadAllTee(src, declared, limit, nil)
}

// ReadAllTee is ReadAll that also writes every byte it reads to tee, in
// order (a MAC computed as the bytes arrive). A body mapped at once to its
// declared length is written to tee from a goroutine of its own while the
// reading goes on, so that tee's work (SHA-256 is slower than the network
// on loopback) overlaps the reading; other bodies are written to it as
// they are read. Either way ReadAllTee returns once tee has been written
// everything read, and tee is never written after. A nil tee is ReadAll.
func ReadAllTee(src io.Reader, declared, limit int64, tee io.Writer) (*Body, error) {
	limit = min(max(limit, 0), math.MaxInt64-1)
	declared = min(declared, limit)
	b := &Body{}
	var buf []byte
	if declared+1 >= MinMapped && declared < maxSizedOnce {
		buf = b.mapTo(nil, int(declared+1))
	}
	var t teeWriter
	if tee != nil {
		t.start(tee, buf != nil)
		// Every return waits for tee, before the buffer can be given back.
		defer t.wait()
	}
	if buf == nil {
		b.pooled = buffers.Get().(*[]byte)
		buf = (*b.pooled)[:0]
	}
	if cap(buf) == 0 {
		first := int64(firstBuffer)
		if declared >= 0 {
			first = min(first, declared+1)
		}
		buf = make([]byte, 0, min(first, limit+1))
	}
	for src != nil {
		if len(buf) == cap(buf) {
			t.wait() // tee may be reading the buffer grow moves
			buf = b.grow(buf, declared, limit)
		}
		// At most one byte over the limit is read: enough to know the body
		// is too large.
		end := min(int64(cap(buf)), limit+1)
		n, err := src.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			t.wait()
			b.buf = buf
			b.put()
			return nil, ErrTooLarge
		}
		if n > 0 && tee != nil {
			t.write(buf[len(buf)-n:])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.wait()
			b.buf = buf
			b.put()
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, ErrTooLarge
			}
			return nil, err
		}
	}
	t.wait()
	b.buf = buf
	b.r.Reset(buf)
	return b, nil
}

// teeWriter writes the pieces of a body to a writer, from a goroutine of
// its own when it is started pipelined.
type teeWriter struct {
	w      io.Writer
	pieces chan []byte   // nil when not pipelined
	done   chan struct{} // closed when the goroutine has written every piece
}

func (t *teeWriter) start(w io.Writer, pipelined bool) {
	t.w = w
	if !pipelined {
		return
	}
	t.pieces, t.done = make(chan []byte, 64), make(chan struct{})
	go func(pieces <-chan []byte, done chan<- struct{}) {
		defer close(done)
		for p := range pieces {
			_, _ = w.Write(p)
		}
	}(t.pieces, t.done)
}

// write writes p, a piece of the body's buffer that stays as it is until
// wait returns.
func (t *teeWriter) write(p []byte) {
	if t.pieces == nil {
		_, _ = t.w.Write(p)
		return
	}
	t.pieces <- p
}

// wait returns once every piece is written; the goroutine is gone after
// it, and later pieces are written directly.
func (t *teeWriter) wait() {
	if t.pieces == nil {
		return
	}
	close(t.pieces)
	<-t.done
	t.pieces = nil
}

// grow returns a copy of the full buf with growth times the room (at least
// firstBuffer), up to the declared length plus one while the body is
// within it, and never over limit plus one. From MinMapped bytes on the
// copy is a mapping; a body of unknown length reserves more at once there
// (up to maxReserve), as its room costs nothing until written.
func (b *Body) grow(buf []byte, declared, limit int64) []byte {
	size := max(growth*int64(cap(buf)), firstBuffer)
	within := declared >= 0 && int64(len(buf)) <= declared
	if within {
		size = min(size, declared+1)
	}
	if !within && size >= MinMapped {
		size = max(size, maxReserve)
	}
	size = min(size, limit+1)
	if size >= MinMapped {
		if grown := b.mapTo(buf, int(size)); grown != nil {
			return grown
		}
	}
	grown := make([]byte, len(buf), size)
	copy(grown, buf)
	b.unmap(len(buf))
	return grown
}

// mapTo moves b's buffer, buf (nil for none), to a new mapping of size
// bytes and returns it, or returns nil and leaves everything as it was when
// no mapping is to be had. What held buf before goes back (a heap buffer
// to the pool, a mapping to the system).
func (b *Body) mapTo(buf []byte, size int) []byte {
	m := newMapping(b, size)
	if m == nil {
		return nil
	}
	grown := m.mem[:copy(m.mem, buf):size] // a spare may be larger
	if b.pooled != nil {
		if cap(buf) <= MaxPooled {
			*b.pooled = buf[:0]
			buffers.Put(b.pooled)
		}
		b.pooled = nil
	}
	b.unmap(len(buf))
	b.mapped = m
	return grown
}

// unmap gives back b's mapping, if it holds one, of which written bytes
// were written.
func (b *Body) unmap(written int) {
	if b.mapped != nil {
		b.mapped.release(written)
		b.mapped = nil
	}
}

// Bytes returns the body as read, or as set by Replace. It stays valid
// until the body is both released and closed; the caller keeps the Body
// reachable while it uses the bytes (a deferred Release does), and keeps
// none of them past that.
func (b *Body) Bytes() []byte { return b.buf }

// Len is the length of the body.
func (b *Body) Len() int { return len(b.buf) }

// Replace makes p the body, from its start; the Body takes p, and the
// caller must not use it afterwards. Call it only before the body is
// handed on; the bytes Bytes returned before are invalid after it.
func (b *Body) Replace(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.put()
	b.pooled = &p
	b.buf = p
	b.r.Reset(p)
}

// Read reads the body; reading after Close is an error.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.Read(p)
}

// WriteTo writes the rest of the body to w without a buffer of its own.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.WriteTo(w)
}

// Close ends the reader's use of the body; the buffer is given back if
// the handler is done too. A second Close does nothing.
func (b *Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && b.done {
		b.put()
	}
	b.closed = true
	return nil
}

// Release ends the handler's use of the body; the buffer is given back if
// the body is closed too. A handler that does not hand the body on closes
// it as well.
func (b *Body) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed && !b.done {
		b.put()
	}
	b.done = true
}

// put gives the buffer back: a heap buffer to the pool, a mapping to the
// system. It is called once, with mu held (or before the Body is shared),
// when nothing can read the buffer any more.
func (b *Body) put() {
	p, buf := b.pooled, b.buf
	b.pooled, b.buf = nil, nil
	b.r.Reset(nil)
	b.unmap(len(buf))
	if p == nil || cap(buf) == 0 || cap(buf) > MaxPooled {
		return
	}
	*p = buf[:0]
	buffers.Put(p)
}

var (
	_ io.ReadCloser = (*Body)(nil)
	_ io.WriterTo   = (*Body)(nil)
)

// ReadRequest reads the body of r whole into a Body, within limit, writing
// it to tee as it arrives (nil for none), with the read deadline of the
// connection under w at deadline where the connection takes one: a client
// sending slowly cannot hold the handler past it. Once the body is in, the
// deadline is lifted, for the answer and, between requests, for
// keep-alive; after an error it stays, since net/http reads on through
// what is left of the body (up to 256 KB) before answering, and the
// deadline keeps a client that stalls from holding it. Tell the errors
// apart with FailureOf. The handler releases the body; on an error there
// is none.
func ReadRequest(w http.ResponseWriter, r *http.Request, limit int64, deadline time.Time, tee io.Writer) (*Body, error) {
	deadlineSet := setReadDeadline(w, deadline)
	body, err := ReadAllTee(r.Body, r.ContentLength, limit, tee)
	if err != nil {
		return nil, err
	}
	if deadlineSet {
		setReadDeadline(w, time.Time{})
	}
	return body, nil
}

// setReadDeadline sets the read deadline of the connection under w, as
// http.ResponseController does, without allocating; it reports whether
// the connection took it.
func setReadDeadline(w http.ResponseWriter, deadline time.Time) bool {
	for {
		switch u := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return u.SetReadDeadline(deadline) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = u.Unwrap()
		default:
			return false
		}
	}
}

// ReadFailure is why a request body could not be read whole, which decides
// how the request is answered.
type ReadFailure int

// The failures of ReadRequest.
const (
	// BodyUnreadable: the body could not be read (400).
	BodyUnreadable ReadFailure = iota
	// BodyTooLarge: the body holds more than the limit (413).
	BodyTooLarge
	// BodyTooSlow: the body did not arrive before the deadline (408).
	BodyTooSlow
	// BodyAbandoned: the client went away while sending it.
	BodyAbandoned
)

// FailureOf says why err, returned by ReadRequest for r, ended the reading.
func FailureOf(r *http.Request, err error) ReadFailure {
	var maxErr *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrTooLarge) || errors.As(err, &maxErr):
		return BodyTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		return BodyTooSlow
	case r.Context().Err() != nil:
		return BodyAbandoned
	}
	return BodyUnreadable
}
