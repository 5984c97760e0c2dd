package limits

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

// SpillBuffer is an http.ResponseWriter that keeps a whole response, like
// ResponseBuffer, but only up to a memory limit in memory (a mapping from
// MinMapped bytes on, as ResponseBuffer's): beyond it, the body goes to an
// unnamed temporary file, up to a size limit. It serves answers that are
// sent another way when they are large (by URL).
//
// A Write that would take the body over the size limit fails with
// ErrTooLarge, as does every Write after a WriteHeader whose
// Content-Length header already declares more. Close releases the file.
type SpillBuffer struct {
	header   http.Header
	status   int
	mem      held
	memMax   int64
	file     *os.File
	size     int64
	max      int64
	dir      string
	tooLarge bool
	declared int64
	err      error
}

// NewSpillBuffer returns a buffer for a response whose header starts as a
// copy of initial, kept in memory up to mem bytes and in a file of dir
// beyond, up to max bytes.
func NewSpillBuffer(initial http.Header, mem, max int64, dir string) *SpillBuffer {
	sb := &SpillBuffer{header: initial.Clone(), memMax: mem, max: max, dir: dir, declared: -1}
	if sb.header == nil {
		sb.header = make(http.Header)
	}
	return sb
}

// Header returns the header of the buffered response.
func (sb *SpillBuffer) Header() http.Header { return sb.header }

// WriteHeader records the status; informational statuses are dropped. A
// Content-Length header over the size limit marks the response too large.
func (sb *SpillBuffer) WriteHeader(status int) {
	if sb.status != 0 || status < 200 {
		return
	}
	sb.status = status
	if n, err := strconv.ParseInt(sb.header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		sb.declared = n
		sb.tooLarge = n > sb.max
		if n <= sb.memMax {
			sb.mem.sizeTo(n)
		}
	}
}

// Write buffers p, in memory or in the file, or fails with ErrTooLarge
// when the body would grow over the size limit, or with the error of the
// file.
func (sb *SpillBuffer) Write(p []byte) (int, error) {
	if sb.status == 0 {
		sb.WriteHeader(http.StatusOK)
	}
	if sb.tooLarge || sb.size+int64(len(p)) > sb.max {
		sb.tooLarge = true
		return 0, ErrTooLarge
	}
	if sb.err != nil {
		return 0, sb.err
	}
	if sb.file == nil && sb.size+int64(len(p)) > sb.memMax {
		f, err := os.CreateTemp(sb.dir, "answer-*")
		if err == nil {
			_ = os.Remove(f.Name()) // unnamed: nothing is left behind
			_, err = f.Write(sb.mem.body)
		}
		if err != nil {
			sb.err = fmt.Errorf("keeping a large answer on disk: %w", err)
			return 0, sb.err
		}
		sb.file = f
		sb.mem.release(0)
	}
	sb.size += int64(len(p))
	if sb.file != nil {
		return sb.file.Write(p)
	}
	sb.mem.write(p, sb.declared, sb.memMax)
	return len(p), nil
}

// Flush does nothing: the answer is sent once complete.
func (sb *SpillBuffer) Flush() {}

// Status is the recorded status, 0 when none was written.
func (sb *SpillBuffer) Status() int { return sb.status }

// TooLarge reports whether the response broke the size limit.
func (sb *SpillBuffer) TooLarge() bool { return sb.tooLarge }

// DeclaredSize is the body size the response declared in its
// Content-Length header, -1 when it declared none.
func (sb *SpillBuffer) DeclaredSize() int64 { return sb.declared }

// Size is the size of the body buffered.
func (sb *SpillBuffer) Size() int64 { return sb.size }

// Err is the error that lost the answer: the file could not be written.
func (sb *SpillBuffer) Err() error { return sb.err }

// Spilled reports whether the body is over the memory limit, in the file.
func (sb *SpillBuffer) Spilled() bool { return sb.file != nil }

// Reader reads the body from its start.
func (sb *SpillBuffer) Reader() io.Reader {
	if sb.file != nil {
		_, _ = sb.file.Seek(0, io.SeekStart)
		return sb.file
	}
	return bytes.NewReader(sb.mem.body)
}

// WriteTo sends a response kept in memory: see WriteResponse.
func (sb *SpillBuffer) WriteTo(w http.ResponseWriter, head bool) error {
	return WriteResponse(w, sb.header, sb.status, sb.declared, sb.mem.body, head)
}

// Close releases the memory and the file: what Reader returned and the
// body WriteTo sent are invalid after it.
func (sb *SpillBuffer) Close() error {
	sb.mem.release(0)
	if sb.file != nil {
		return sb.file.Close()
	}
	return nil
}

var _ http.Flusher = (*SpillBuffer)(nil)
