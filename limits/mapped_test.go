package limits

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needMappings skips a test on systems without anonymous mappings.
func needMappings(t *testing.T) {
	t.Helper()
	mem, _ := mapBuffer(MinMapped)
	if mem == nil {
		t.Skip("no anonymous mappings on this system")
	}
	unmapBuffer(mem, 0)
}

// mappingsBack waits for the count of mappings in use to come back to want;
// mappings that other tests leave to the garbage collector may take a few
// cycles.
func mappingsBack(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for inUse.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d mappings alive, want %d", inUse.Load(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// A body of declared length at least MinMapped is mapped once, to the
// declared length plus one: no copy on the way in, nothing on the heap.
func TestBodyMapsDeclaredLengthOnce(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16)
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	heapBefore := stats.TotalAlloc
	b, err := ReadAll(&capReader{data: data, step: 32 << 10, checked: func(int, int) {}}, int64(len(data)), 5<<20)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&stats)
	if grown := stats.TotalAlloc - heapBefore; grown > 64<<10 {
		t.Errorf("reading a 5 MiB body allocated %d bytes on the heap", grown)
	}
	if b.mapped == nil || cap(b.Bytes()) != len(data)+1 {
		t.Fatalf("mapped %v, buffer of %d bytes for %d declared", b.mapped != nil, cap(b.Bytes()), len(data))
	}
	if inUse.Load() != before+1 {
		t.Fatalf("%d mappings alive, want %d", inUse.Load(), before+1)
	}
	if !bytes.Equal(b.Bytes(), data) {
		t.Fatal("the body is not what was sent")
	}
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	b.Release()
	if inUse.Load() != before+1 {
		t.Fatal("unmapped while the body is still open")
	}
	_ = b.Close()
	if inUse.Load() != before {
		t.Fatal("still mapped after the handler and the reader are done")
	}
	if _, err := b.Read(make([]byte, 1)); err != http.ErrBodyReadAfterClose {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := b.WriteTo(io.Discard); err != http.ErrBodyReadAfterClose {
		t.Fatalf("write after close: %v", err)
	}
	runtime.KeepAlive(b)
}

// A body of unknown length moves to a mapping once it would reach
// MinMapped, reserving up to its limit there, and is read whole.
func TestBodyUndeclaredMovesToMapping(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	pool := &recordingPool{}
	withPool(t, pool)
	data := bytes.Repeat([]byte("x"), 3<<20)
	b, err := ReadAll(&capReader{data: data, step: 16 << 10, checked: func(int, int) {}}, -1, 5<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b.mapped == nil || cap(b.Bytes()) != 5<<20+1 || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("mapped %v, buffer of %d bytes, body of %d", b.mapped != nil, cap(b.Bytes()), b.Len())
	}
	if len(pool.got) != 1 {
		t.Errorf("the heap buffer left for the mapping went back to the pool %d times, want once", len(pool.got))
	}
	_ = b.Close()
	b.Release()
	if inUse.Load() != before {
		t.Fatal("still mapped after the handler and the reader are done")
	}
	// Over the limit: refused, nothing left mapped.
	if _, err := ReadAll(bytes.NewReader(make([]byte, 1<<20+1)), -1, 1<<20); err != ErrTooLarge {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := ReadAll(bytes.NewReader(make([]byte, 1<<20+1)), 1<<20, 1<<20); err != ErrTooLarge {
		t.Fatalf("over the limit, declared within: %v", err)
	}
	if inUse.Load() != before {
		t.Fatal("a refused body left its mapping")
	}
}

// Replace unmaps the body it replaces; what it reads is the new body.
func TestBodyReplaceUnmaps(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	b, err := ReadAll(bytes.NewReader(make([]byte, 1<<20)), 1<<20, 5<<20)
	if err != nil || b.mapped == nil {
		t.Fatalf("mapped %v, %v", b != nil && b.mapped != nil, err)
	}
	b.Replace([]byte(`{"strings":[]}`))
	if inUse.Load() != before {
		t.Fatal("the replaced body is still mapped")
	}
	got, _ := io.ReadAll(b)
	if string(got) != `{"strings":[]}` {
		t.Fatalf("read %q after Replace", got)
	}
	b.Release()
	_ = b.Close()
}

// A Body dropped by a handler that neither reads nor closes it is unmapped
// by the garbage collector.
func TestBodyDroppedIsUnmapped(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	func() {
		b, err := ReadAll(bytes.NewReader(make([]byte, 1<<20)), 1<<20, 5<<20)
		if err != nil || b.mapped == nil {
			t.Fatal(err)
		}
		b.Release() // never closed
	}()
	mappingsBack(t, before)
}

// 400 bodies declaring 5 MiB each and sending 1 byte: mapped to 5 MiB each
// (up to maxMappedInUse, the rest on the heap), they hold a page each, not
// the 2 GB promised.
func TestBodyDeclaredLengthFloodResident(t *testing.T) {
	needMappings(t)
	rss := residentBytes(t)
	bodies := make([]*Body, 0, 400)
	defer func() {
		for _, b := range bodies {
			b.Release()
			_ = b.Close()
		}
	}()
	mapped := 0
	for range 400 {
		b, err := ReadAll(strings.NewReader("{"), 5<<20, 5<<20)
		if err != nil {
			t.Fatal(err)
		}
		if b.mapped != nil {
			mapped++
		}
		bodies = append(bodies, b)
	}
	grown := residentBytes(t) - rss
	if want := maxMappedInUse / (5<<20 + 1); mapped != want {
		t.Errorf("%d of 400 bodies declaring 5 MiB mapped, want %d (maxMappedInUse)", mapped, want)
	}
	t.Logf("400 bodies declaring 5 MiB, 1 byte each, %d of them mapped: resident memory grew by %d KiB", mapped, grown>>10)
	if grown > 32<<20 {
		t.Errorf("400 bodies declaring 5 MiB, 1 byte each, made resident memory grow by %d MiB", grown>>20)
	}
}

// residentBytes is the process's resident memory, from /proc/self/statm.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm:", err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// net/http's transport goes on sending a body after the answer came back
// (the app answered before reading it); the handler releases the body when
// the answer is in. The mapping stays until the transport closes the body:
// an early unmap would kill the test process in the transport's write.
func TestBodyOutlivesHandlerWhileTransportSends(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	// more than the loopback socket buffers hold: the transport is still
	// sending when the answer is in
	const size = 32 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	want := sha256.Sum256(data)
	answered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex() //nolint:errcheck // HTTP/1 server: supported
		w.WriteHeader(http.StatusAccepted)
		w.(http.Flusher).Flush()
		<-answered // the client has its answer and released the body
		h := sha256.New()
		for {
			time.Sleep(time.Millisecond) // a slow reader
			if n, err := io.CopyN(h, r.Body, 1<<20); err != nil || n == 0 {
				break
			}
		}
		_, _ = w.Write(h.Sum(nil))
	}))
	defer srv.Close()

	b, err := ReadAll(bytes.NewReader(data), size, size)
	if err != nil || b.mapped == nil {
		t.Fatalf("mapped %v, %v", b != nil && b.mapped != nil, err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, b)
	req.ContentLength = int64(b.Len())
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b.Release() // the handler is done; the transport is not
	b = nil
	runtime.GC()
	if inUse.Load() != before+1 {
		t.Error("the body was unmapped before the transport was done with it")
	}
	close(answered)
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !bytes.Equal(got, want[:]) {
		t.Fatalf("the app received another body than the one sent (%v)", err)
	}
	mappingsBack(t, before)
}

// An answer of declared length at least MinMapped is mapped once, to its
// length; Release unmaps it, and the buffer serves the next answer.
func TestResponseBufferMapsDeclaredLength(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16)
	rb := newBuffer(nil, 5<<20)
	rb.Header().Set("Content-Length", strconv.Itoa(len(data)))
	rb.WriteHeader(http.StatusOK)
	if rb.held.mapped == nil || cap(rb.Body()) != len(data) {
		t.Fatalf("mapped %v, buffer of %d bytes for %d declared", rb.held.mapped != nil, cap(rb.Body()), len(data))
	}
	mapped := &rb.Body()[:1][0]
	for p := data; len(p) > 0; p = p[min(len(p), 32<<10):] {
		if _, err := rb.Write(p[:min(len(p), 32<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(rb.Body(), data) || &rb.Body()[0] != mapped {
		t.Fatal("the answer is not what was written, in its one mapping")
	}
	rec := httptest.NewRecorder()
	if err := rb.WriteTo(rec, false); err != nil || !bytes.Equal(rec.Body.Bytes(), data) {
		t.Fatalf("sent %d bytes, %v", rec.Body.Len(), err)
	}
	rb.Release()
	if inUse.Load() != before {
		t.Fatal("still mapped after Release")
	}
	rb.Reset(nil, 100)
	if _, err := rb.Write([]byte("small")); err != nil || string(rb.Body()) != "small" {
		t.Fatalf("after Release and Reset: %q, %v", rb.Body(), err)
	}
}

// An answer of unknown length moves to a mapping once it would reach
// MinMapped; Reset unmaps it, and a dropped buffer is unmapped by the
// garbage collector.
func TestResponseBufferUndeclaredMoves(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("y"), 3<<20)
	rb := newBuffer(nil, 5<<20)
	for p := data; len(p) > 0; p = p[min(len(p), 32<<10):] {
		if _, err := rb.Write(p[:min(len(p), 32<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	if rb.held.mapped == nil || !bytes.Equal(rb.Body(), data) || cap(rb.Body()) > 5<<20 {
		t.Fatalf("mapped %v, %d bytes in a buffer of %d", rb.held.mapped != nil, len(rb.Body()), cap(rb.Body()))
	}
	if _, err := rb.Write(make([]byte, 2<<20+1)); err != ErrTooLarge {
		t.Fatalf("over Max: %v", err)
	}
	rb.Reset(nil, 5<<20)
	if inUse.Load() != before || len(rb.Body()) != 0 {
		t.Fatalf("after Reset: %d mappings, body of %d", inUse.Load()-before, len(rb.Body()))
	}
	func() {
		dropped := newBuffer(nil, 5<<20)
		_, _ = dropped.Write(make([]byte, 1<<20))
		if dropped.held.mapped == nil {
			t.Fatal("a 1 MiB answer is not mapped")
		}
	}()
	mappingsBack(t, before)
}

// Without mappings, large bodies and answers are heap memory as before.
func TestBuffersWithoutMappings(t *testing.T) {
	withoutMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("z"), 1<<20)
	b, err := ReadAll(bytes.NewReader(data), int64(len(data)), 5<<20)
	if err != nil || b.mapped != nil || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("body: %v", err)
	}
	b.Release()
	_ = b.Close()
	rb := newBuffer(nil, 5<<20)
	if _, err := rb.Write(data); err != nil || rb.held.mapped != nil || !bytes.Equal(rb.Body(), data) {
		t.Fatalf("answer: %v", err)
	}
	rb.Release()
	if cap(rb.held.heap) > MaxPooled || inUse.Load() != before {
		t.Fatalf("Release kept a heap buffer of %d bytes", cap(rb.held.heap))
	}
}

// Mappings given back are kept as spares up to maxSpare bytes written, and
// taken again by the next buffers; the rest are unmapped at once.
func TestSparesBounded(t *testing.T) {
	needMappings(t)
	live := liveMappings.Load()
	bodies := make([]*Body, 8)
	for i := range bodies {
		b, err := ReadAll(bytes.NewReader(make([]byte, 5<<20)), 5<<20, 5<<20)
		if err != nil || b.mapped == nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	for _, b := range bodies {
		b.Release()
		_ = b.Close()
	}
	spare.Lock()
	kept, written := len(spare.maps), spare.bytes
	spare.Unlock()
	if written > maxSpare {
		t.Errorf("%d spare mappings with %d bytes written, over %d", kept, written, maxSpare)
	}
	if now := liveMappings.Load(); now > live+int64(maxSpare/(5<<20)) {
		t.Errorf("%d more mappings alive after the bodies were done", now-live)
	}
	// The next body takes a spare: no new mapping.
	before := liveMappings.Load()
	b, err := ReadAll(bytes.NewReader(make([]byte, 1<<20)), 1<<20, 5<<20)
	if err != nil || b.mapped == nil || cap(b.Bytes()) != 1<<20+1 {
		t.Fatalf("mapped %v, buffer of %d, %v", b != nil && b.mapped != nil, cap(b.Bytes()), err)
	}
	if liveMappings.Load() != before {
		t.Error("a new mapping while a spare was there")
	}
	b.Release()
	_ = b.Close()
}

// teeRecorder keeps what ReadAllTee writes to it, slowly, and fails the
// test when written after ReadAllTee returned.
type teeRecorder struct {
	t        *testing.T
	got      []byte
	returned bool
}

func (r *teeRecorder) Write(p []byte) (int, error) {
	if r.returned {
		r.t.Error("tee written after ReadAllTee returned")
	}
	time.Sleep(50 * time.Microsecond) // slower than the reading
	r.got = append(r.got, p...)
	return len(p), nil
}

// ReadAllTee writes every byte it reads to the tee, in order, and is done
// with the tee when it returns, whether the body was mapped at once
// (written from a goroutine beside the reading), grew, or was refused.
func TestReadAllTee(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu"), (3<<20)/31)
	tests := []struct {
		name     string
		src      io.Reader
		declared int64
		limit    int64
		err      error
	}{
		{"mapped at once", &capReader{data: data, step: 20 << 10, checked: func(int, int) {}}, int64(len(data)), 5 << 20, nil},
		{"mapped at once, client sends more", &capReader{data: data, step: 20 << 10, checked: func(int, int) {}}, 1 << 20, 5 << 20, nil},
		{"unknown length", &capReader{data: data, step: 20 << 10, checked: func(int, int) {}}, -1, 5 << 20, nil},
		{"small", strings.NewReader("hello"), 5, 10, nil},
		{"over the limit", bytes.NewReader(data), int64(len(data)), 1 << 20, ErrTooLarge},
		{"read error", io.MultiReader(bytes.NewReader(data), iotestErrReader{}), int64(len(data)) + 10, 5 << 20, errBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := inUse.Load()
			rec := &teeRecorder{t: t}
			b, err := ReadAllTee(tt.src, tt.declared, tt.limit, rec)
			rec.returned = true
			if err != tt.err {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if err != nil {
				if inUse.Load() != before {
					t.Error("a refused body left its mapping")
				}
				return
			}
			if !bytes.Equal(rec.got, b.Bytes()) || b.Len() == 0 {
				t.Fatalf("the tee got %d bytes of the %d read", len(rec.got), b.Len())
			}
			b.Release()
			_ = b.Close()
			time.Sleep(time.Millisecond) // a late write would show
		})
	}
}

var errBroken = errors.New("connection broken")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBroken }

// Past maxReserve, a body or answer of unknown length moves to a larger
// mapping, its bytes whole.
func TestMappingsGrowPastReserve(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu"), (maxReserve+maxReserve/8)/31)
	b, err := ReadAll(&capReader{data: data, step: 1 << 20, checked: func(int, int) {}}, -1, 100<<20)
	if err != nil || b.mapped == nil || cap(b.Bytes()) != 100<<20+1 || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("mapped %v, %d bytes in a buffer of %d, %v", b != nil && b.mapped != nil, b.Len(), cap(b.Bytes()), err)
	}
	b.Release()
	_ = b.Close()
	rb := newBuffer(nil, 100<<20)
	for p := data; len(p) > 0; p = p[min(len(p), 1<<20):] {
		if _, err := rb.Write(p[:min(len(p), 1<<20)]); err != nil {
			t.Fatal(err)
		}
	}
	if rb.held.mapped == nil || cap(rb.Body()) != 100<<20 || !bytes.Equal(rb.Body(), data) {
		t.Fatalf("mapped %v, %d bytes in a buffer of %d", rb.held.mapped != nil, len(rb.Body()), cap(rb.Body()))
	}
	rb.Release()
	if inUse.Load() != before {
		t.Fatal("mappings left in use")
	}
}

// SpillBuffer keeps its memory part in a mapping as ResponseBuffer does,
// gives it back when the body goes to the file, and on Close.
func TestSpillBufferMapsItsMemory(t *testing.T) {
	needMappings(t)
	before := inUse.Load()
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstu"), (3<<20)/31)
	sb := NewSpillBuffer(nil, 4<<20, 16<<20, t.TempDir())
	sb.Header().Set("Content-Length", strconv.Itoa(len(data)))
	for p := data; len(p) > 0; p = p[min(len(p), 32<<10):] {
		if _, err := sb.Write(p[:min(len(p), 32<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	if sb.mem.mapped == nil || cap(sb.mem.body) != len(data) || sb.Spilled() {
		t.Fatalf("mapped %v, buffer of %d for %d declared, spilled %v", sb.mem.mapped != nil, cap(sb.mem.body), len(data), sb.Spilled())
	}
	if got, _ := io.ReadAll(sb.Reader()); !bytes.Equal(got, data) {
		t.Fatal("read back another answer than written")
	}
	_ = sb.Close()
	if inUse.Load() != before {
		t.Fatal("still mapped after Close")
	}

	// Of unknown length, over the memory limit: to the file, the mapping
	// given back at once.
	sb = NewSpillBuffer(nil, 2<<20, 16<<20, t.TempDir())
	defer sb.Close()
	for p := data; len(p) > 0; p = p[min(len(p), 32<<10):] {
		if _, err := sb.Write(p[:min(len(p), 32<<10)]); err != nil {
			t.Fatal(err)
		}
		if !sb.Spilled() && sb.mem.mapped == nil && len(sb.mem.body) >= MinMapped {
			t.Fatal("a memory part over MinMapped is not mapped")
		}
	}
	if !sb.Spilled() || inUse.Load() != before {
		t.Fatalf("spilled %v, %d mappings in use", sb.Spilled(), inUse.Load()-before)
	}
	if got, _ := io.ReadAll(sb.Reader()); !bytes.Equal(got, data) {
		t.Fatal("read back another answer than written")
	}
}
