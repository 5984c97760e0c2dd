package limits

import (
	"net/http"
	"strconv"
)

// ResponseBuffer is an http.ResponseWriter that keeps a whole response, its
// status, header and body, in memory up to a size limit, so that the
// response can be checked before any of it is sent, and replaced by another
// answer when it breaks a limit.
//
// A Write that would take the body over Max fails with ErrTooLarge, and so
// does every Write after a WriteHeader whose Content-Length header already
// declares more than Max: the writer upstream learns at once that its
// answer will not be sent. Flush does nothing: nothing leaves the buffer
// before WriteTo. The zero value is not usable; call Reset first.
//
// A body of at least MinMapped bytes is kept in a memory mapping (see
// MinMapped), sized once to a declared Content-Length within Max; Reset
// and Release unmap it, and the garbage collector does when a buffer
// holding one is dropped. Smaller bodies are heap memory, kept by Reset for
// the next response.
type ResponseBuffer struct {
	// Max is the largest body, in bytes, the buffer accepts.
	Max int64

	header   http.Header
	status   int
	held     held
	tooLarge bool
	declared int64
}

// held is the body of a response kept whole: heap memory, kept for the
// next response, below MinMapped bytes; a mapping from there on.
type held struct {
	body   []byte   // in heap or in mapped
	heap   []byte   // the heap buffer, kept for the next response
	mapped *mapping // the mapping body lies in, if any
}

// Reset empties rb for a new response whose header starts as a copy of
// initial (the header already set on the real response, so handlers behind
// the buffer see and change it as they would without the buffer) and whose
// body may hold at most max bytes. It keeps the heap memory rb already
// holds and gives back a mapping: the body Body returned before is invalid.
func (rb *ResponseBuffer) Reset(initial http.Header, max int64) {
	if rb.header == nil {
		rb.header = make(http.Header, len(initial))
	} else {
		clear(rb.header)
	}
	for k, v := range initial {
		rb.header[k] = append([]string(nil), v...)
	}
	rb.Max = max
	rb.status = 0
	rb.held.unmap()
	rb.tooLarge = false
	rb.declared = -1
}

// Header returns the header of the buffered response.
func (rb *ResponseBuffer) Header() http.Header { return rb.header }

// WriteHeader records the status. Informational (1xx) statuses are dropped:
// the final answer is only known once the whole response is in. A
// Content-Length header over Max marks the response too large at once.
func (rb *ResponseBuffer) WriteHeader(status int) {
	if rb.status != 0 || status < 200 {
		return
	}
	rb.status = status
	if cl := rb.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			rb.declared = n
			if n > rb.Max {
				rb.tooLarge = true
			} else {
				rb.held.sizeTo(n)
			}
		}
	}
}

// Write buffers p, or fails with ErrTooLarge, keeping nothing of p, when the
// body would grow over Max.
func (rb *ResponseBuffer) Write(p []byte) (int, error) {
	if rb.status == 0 {
		rb.WriteHeader(http.StatusOK)
	}
	if rb.tooLarge || int64(len(rb.held.body))+int64(len(p)) > rb.Max {
		rb.tooLarge = true
		return 0, ErrTooLarge
	}
	rb.held.write(p, rb.declared, rb.Max)
	return len(p), nil
}

// sizeTo makes room for a body of declared length n at once.
func (h *held) sizeTo(n int64) {
	if int(n) > cap(h.body) {
		h.grow(int(n), n, n)
	}
}

// write appends p, growing the buffer (at most to limit bytes, which the
// caller checked p fits in) for a body of declared length declared (-1 when
// unknown).
func (h *held) write(p []byte, declared, limit int64) {
	if need := len(h.body) + len(p); need > cap(h.body) {
		h.grow(int(min(int64(max(need, 2*cap(h.body))), limit)), declared, limit)
	}
	h.body = append(h.body, p...)
}

// grow moves the body to a buffer of size bytes (at most limit, at least
// the body): a mapping from MinMapped bytes on, where a body of unknown or
// exceeded length reserves more at once (up to maxReserve), as room costs
// nothing until written; heap memory below, or when no mapping is to be
// had.
func (h *held) grow(size int, declared, limit int64) {
	if size >= MinMapped {
		reserve := size
		if int64(size) > declared {
			reserve = int(max(min(maxReserve, limit), int64(size)))
		}
		if m := newMapping(h, reserve); m != nil {
			body := m.mem[:copy(m.mem, h.body):reserve] // a spare may be larger
			h.unmap()
			h.body, h.mapped = body, m
			return
		}
	}
	heap := make([]byte, len(h.body), size)
	copy(heap, h.body)
	h.unmap()
	h.body, h.heap = heap, heap
}

// unmap gives back the mapping the body lies in, if any, and empties the
// body.
func (h *held) unmap() {
	if h.mapped != nil {
		h.mapped.release(len(h.body))
		h.mapped = nil
	}
	h.body = h.heap[:0]
}

// release gives back a mapping, and a heap buffer over keep bytes.
func (h *held) release(keep int) {
	if cap(h.heap) > keep {
		h.heap = nil
	}
	h.unmap()
}

// Release gives back the memory of a large body now: a mapping to the
// system, a heap buffer over MaxPooled to the garbage collector. The body
// Body returned before is invalid after it; call it once the response is
// sent, and Reset before using rb again.
func (rb *ResponseBuffer) Release() { rb.held.release(MaxPooled) }

// Flush does nothing: the response is sent by WriteTo once complete.
func (rb *ResponseBuffer) Flush() {}

// Status is the recorded status, 0 when none was written.
func (rb *ResponseBuffer) Status() int { return rb.status }

// Body is the buffered body. It stays valid until the next Reset or
// Release; the caller keeps rb reachable while it uses it, and keeps none
// of it past that.
func (rb *ResponseBuffer) Body() []byte { return rb.held.body }

// TooLarge reports whether the response broke the size limit.
func (rb *ResponseBuffer) TooLarge() bool { return rb.tooLarge }

// DeclaredSize is the body size the response declared in its
// Content-Length header, -1 when it declared none.
func (rb *ResponseBuffer) DeclaredSize() int64 { return rb.declared }

// WriteTo sends the buffered response to w: see WriteResponse.
func (rb *ResponseBuffer) WriteTo(w http.ResponseWriter, head bool) error {
	return WriteResponse(w, rb.header, rb.status, rb.declared, rb.held.body, head)
}

// WriteResponse sends a complete response held in memory to w: w's header
// becomes header, then status and body follow. A response that declared no
// length (declared < 0) gets a Content-Length header for its body (except
// for HEAD requests and statuses without a body, as told by head), so the
// client knows the answer is complete. Nothing is written when status is 0
// (no response was recorded). The error is w's.
func WriteResponse(w http.ResponseWriter, header http.Header, status int, declared int64, body []byte, head bool) error {
	dst := w.Header()
	for k := range dst {
		if _, ok := header[k]; !ok {
			delete(dst, k)
		}
	}
	for k, v := range header {
		dst[k] = v
	}
	if status == 0 {
		return nil
	}
	if !head && bodyAllowed(status) && declared < 0 && len(dst["Transfer-Encoding"]) == 0 && len(dst["Trailer"]) == 0 {
		dst["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	if len(body) == 0 {
		return nil
	}
	_, err := w.Write(body)
	return err
}

// bodyAllowed reports whether a response with status may carry a body
// (RFC 9110: not 1xx, 204 or 304).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

var _ http.Flusher = (*ResponseBuffer)(nil)
