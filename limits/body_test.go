package limits

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadAll(t *testing.T) {
	text := strings.Repeat("0123456789", 30<<10) // 300 KiB: grows past MaxPooled
	tests := []struct {
		name     string
		src      io.Reader
		declared int64
		max      int64
		want     string
		err      error
	}{
		{"empty", strings.NewReader(""), 0, 10, "", nil},
		{"nil", nil, -1, 10, "", nil},
		{"declared", strings.NewReader("hello"), 5, 10, "hello", nil},
		{"undeclared", strings.NewReader("hello"), -1, 10, "hello", nil},
		{"declared short", strings.NewReader("hello"), 2, 10, "hello", nil},
		{"declared long", strings.NewReader("hello"), 9000, 10000, "hello", nil},
		{"at the limit", strings.NewReader("hello"), -1, 5, "hello", nil},
		{"over the limit", strings.NewReader("hello!"), -1, 5, "", ErrTooLarge},
		{"over the limit, declared within", strings.NewReader("hello!"), 5, 5, "", ErrTooLarge},
		{"zero limit", strings.NewReader("h"), -1, 0, "", ErrTooLarge},
		{"large, one byte at a time", iotest.OneByteReader(strings.NewReader(text[:20000])), -1, 1 << 20, text[:20000], nil},
		{"large, declared", iotest.HalfReader(strings.NewReader(text)), int64(len(text)), 1 << 20, text, nil},
		{"large, undeclared", strings.NewReader(text), -1, 1 << 20, text, nil},
		{"large, data with EOF", iotest.DataErrReader(strings.NewReader(text)), -1, 1 << 20, text, nil},
		{"large, over the limit", strings.NewReader(text), -1, 100 << 10, "", ErrTooLarge},
		{"max bytes reader", http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(text)), 1000), -1, 1 << 20, "", ErrTooLarge},
		{"read error", iotest.ErrReader(io.ErrUnexpectedEOF), -1, 10, "", io.ErrUnexpectedEOF},
		{"timeout", iotest.TimeoutReader(strings.NewReader(text)), -1, 1 << 20, "", iotest.ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadAll(tt.src, tt.declared, tt.max)
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if err != nil {
				if b != nil {
					t.Fatal("a body came with the error")
				}
				return
			}
			if string(b.Bytes()) != tt.want || b.Len() != len(tt.want) {
				t.Fatalf("read %d bytes, want %d", b.Len(), len(tt.want))
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != tt.want {
				t.Fatalf("read back %d bytes, %v", len(got), err)
			}
			b.Release()
			_ = b.Close()
		})
	}
}

// capReader hands out its bytes in reads of at most step bytes, and keeps
// the largest room (len(p)) a read was offered next to how much it had
// handed out before: the room is what the body's buffer has left.
type capReader struct {
	data    []byte
	step    int
	sent    int
	checked func(sent, room int)
}

func (r *capReader) Read(p []byte) (int, error) {
	r.checked(r.sent, len(p))
	if r.sent == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data[r.sent:])
	r.sent += n
	return n, nil
}

// withoutMappings makes every buffer heap memory for the test, as on a
// system without mappings or with too many alive.
func withoutMappings(t testing.TB) {
	old := mapAnonymous
	mapAnonymous = func(int) ([]byte, error) { return nil, errors.New("no mappings") }
	noSpares = true
	t.Cleanup(func() { mapAnonymous, noSpares = old, false })
}

// A client declares 5 MiB and sends 1 byte: on the heap, the body holds a
// few KiB at most, not the 5 MiB it was promised (with mappings, see
// TestBodyDeclaredLengthFloodResident).
func TestBodyDeclaredLengthSizesNothing(t *testing.T) {
	withoutMappings(t)
	withPool(t, &recordingPool{})
	const declared = 5 << 20
	src := &capReader{data: []byte("{"), step: 1, checked: func(sent, room int) {
		if sent+room > firstBuffer {
			t.Fatalf("after %d bytes received the buffer has room for %d more: more than %d bytes before the bytes arrive", sent, room, firstBuffer)
		}
	}}
	b, err := ReadAll(src, declared, declared)
	if err != nil {
		t.Fatal(err)
	}
	if c := cap(b.Bytes()); c > firstBuffer {
		t.Fatalf("a body declared as 5 MiB with 1 byte sent holds a buffer of %d bytes", c)
	}
}

// A client that keeps its word: on the heap, the buffer grows with the
// bytes received (at most about growth times them) and ends at the declared
// length plus one.
func TestBodyGrowsWithBytesReceived(t *testing.T) {
	withoutMappings(t)
	withPool(t, &recordingPool{})
	const declared = 5 << 20
	data := bytes.Repeat([]byte("x"), declared)
	largest := 0
	src := &capReader{data: data, step: 32 << 10, checked: func(sent, room int) {
		if c := sent + room; c > growth*sent+firstBuffer {
			t.Fatalf("after %d bytes received the buffer holds %d", sent, c)
		}
		largest = max(largest, sent+room)
	}}
	b, err := ReadAll(src, declared, declared)
	if err != nil || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("read %d bytes, %v", b.Len(), err)
	}
	if c := cap(b.Bytes()); c != declared+1 {
		t.Errorf("buffer of %d bytes for a %d-byte body, want %d", c, declared, declared+1)
	}
	// The body is never read past the limit plus one byte.
	if largest > declared+1 {
		t.Errorf("a read was offered room up to %d bytes, over the limit plus one", largest)
	}
}

// recordingPool stands in for the buffer pool: it keeps what it is given.
type recordingPool struct {
	got  []*[]byte
	kept []*[]byte
}

func (p *recordingPool) Get() any {
	if len(p.kept) == 0 {
		return new([]byte)
	}
	b := p.kept[len(p.kept)-1]
	p.kept = p.kept[:len(p.kept)-1]
	return b
}

func (p *recordingPool) Put(x any) {
	b := x.(*[]byte)
	p.got = append(p.got, b)
	p.kept = append(p.kept, b)
}

func withPool(t *testing.T, p *recordingPool) {
	old := buffers
	buffers = p
	t.Cleanup(func() { buffers = old })
}

func TestBodyReturnsBufferOnce(t *testing.T) {
	for _, closeFirst := range []bool{true, false} {
		pool := &recordingPool{}
		withPool(t, pool)
		want := []byte(`{"events":[]}`)
		b, err := ReadAll(bytes.NewReader(want), int64(len(want)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(b)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %q, %v", got, err)
		}
		if closeFirst {
			_ = b.Close()
			if len(pool.got) != 0 {
				t.Fatal("buffer returned while the handler still runs")
			}
			b.Release()
		} else {
			b.Release()
			if len(pool.got) != 0 {
				t.Fatal("buffer returned while the body is still open")
			}
			_ = b.Close()
		}
		if len(pool.got) != 1 {
			t.Fatalf("buffer returned %d times after both the handler and the reader were done, want once", len(pool.got))
		}
		_ = b.Close() // a late second Close is harmless
		b.Release()
		if len(pool.got) != 1 {
			t.Fatal("a late Close or Release returned the buffer again")
		}
		if _, err := b.Read(make([]byte, 1)); !errors.Is(err, http.ErrBodyReadAfterClose) {
			t.Fatalf("read after close: %v", err)
		}
		if _, err := b.WriteTo(io.Discard); !errors.Is(err, http.ErrBodyReadAfterClose) {
			t.Fatalf("write after close: %v", err)
		}
	}
}

// Buffers over MaxPooled are left to the garbage collector: a burst of
// large bodies is not kept after it.
func TestBodyKeepsOnlySmallBuffers(t *testing.T) {
	for _, size := range []int{1, MaxPooled - 1, MaxPooled, MaxPooled + 1, 5 << 20} {
		pool := &recordingPool{}
		withPool(t, pool)
		b, err := ReadAll(bytes.NewReader(make([]byte, size)), int64(size), 5<<20)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		_ = b.Close()
		kept := len(pool.got) == 1
		if want := size < MaxPooled; kept != want {
			t.Errorf("a body of %d bytes (buffer of %d): kept %v, want %v", size, size+1, kept, want)
		}
		for _, p := range pool.got {
			if cap(*p) > MaxPooled || len(*p) != 0 {
				t.Errorf("pooled a buffer of length %d, capacity %d", len(*p), cap(*p))
			}
		}
	}
	// A body that is refused returns its buffer too.
	pool := &recordingPool{}
	withPool(t, pool)
	if _, err := ReadAll(strings.NewReader("too long"), -1, 3); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
	if len(pool.got) != 1 {
		t.Errorf("a refused body returned its buffer %d times, want once", len(pool.got))
	}
}

func TestBodyReplace(t *testing.T) {
	pool := &recordingPool{}
	withPool(t, pool)
	b, err := ReadAll(strings.NewReader(`{"stringsUrl":"u"}`), -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	b.Replace([]byte(`{"strings":[]}`))
	if len(pool.got) != 1 {
		t.Error("the replaced buffer did not go back to the pool")
	}
	got, _ := io.ReadAll(b)
	if string(got) != `{"strings":[]}` || string(b.Bytes()) != `{"strings":[]}` || b.Len() != 14 {
		t.Errorf("read %q after Replace", got)
	}
	b.Release()
	_ = b.Close()
}

func TestBodyReusesPooledBuffers(t *testing.T) {
	job := bytes.Repeat([]byte("j"), 100<<10)
	src := bytes.NewReader(job)
	read := func() {
		src.Reset(job)
		b, err := ReadAll(src, int64(len(job)), 5<<20)
		if err != nil {
			panic(err)
		}
		_, _ = b.WriteTo(io.Discard)
		b.Release()
		_ = b.Close()
	}
	if raceEnabled {
		t.Skip("the race detector drops pooled items at random")
	}
	read()
	// the Body itself; the buffer comes from the pool
	if n := testing.AllocsPerRun(100, read); n > 1 {
		t.Errorf("%.1f allocations per 100 KiB body, want 1", n)
	}
}

func FuzzReadAll(f *testing.F) {
	f.Add([]byte("hello"), int64(5), int64(10), uint8(0))
	f.Add([]byte("hello"), int64(-1), int64(4), uint8(1))
	f.Add([]byte(""), int64(1<<40), int64(0), uint8(2))
	f.Add([]byte("x"), int64(math.MaxInt64), int64(math.MaxInt64), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, declared, limit int64, how uint8) {
		var src io.Reader = bytes.NewReader(data)
		switch how % 3 {
		case 1:
			src = iotest.OneByteReader(src)
		case 2:
			src = iotest.DataErrReader(src)
		}
		withPool(t, &recordingPool{})
		b, err := ReadAll(src, declared, limit)
		if int64(len(data)) > max(limit, 0) {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes with limit %d: %v", len(data), limit, err)
			}
			return
		}
		if err != nil || !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("%d bytes with limit %d: %v", len(data), limit, err)
		}
		if b.mapped == nil && declared >= 0 && int64(len(data)) <= declared && cap(b.Bytes()) > max(growth*len(data), firstBuffer) {
			t.Fatalf("%d bytes (declared %d) in a buffer of %d", len(data), declared, cap(b.Bytes()))
		}
		if b.mapped != nil && int64(cap(b.Bytes())) > max(limit, 0)+1 {
			t.Fatalf("%d bytes (limit %d) in a mapping of %d", len(data), limit, cap(b.Bytes()))
		}
		b.Release()
		_ = b.Close()
	})
}

// deadlineWriter is a ResponseWriter wrapped around a connection that takes
// read deadlines, as Caddy's wrapped writers are.
type deadlineWriter struct {
	http.ResponseWriter
	deadlines []time.Time
}

func (d *deadlineWriter) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// TestReadRequest: the deadline is set on the connection under the
// wrappers and lifted once the body is in, kept after an error; every
// error is told apart by FailureOf.
func TestReadRequest(t *testing.T) {
	deadline := time.Now().Add(time.Minute)
	conn := &deadlineWriter{}
	r, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
	var tee bytes.Buffer
	body, err := ReadRequest(wrapped{conn}, r, 10, deadline, &tee)
	if err != nil || string(body.Bytes()) != "hello" || tee.String() != "hello" {
		t.Fatalf("read %q, tee %q, %v", body.Bytes(), tee.String(), err)
	}
	body.Release()
	if len(conn.deadlines) != 2 || !conn.deadlines[0].Equal(deadline) || !conn.deadlines[1].IsZero() {
		t.Errorf("deadlines %v, want the deadline then none", conn.deadlines)
	}
	conn.deadlines = nil
	r, _ = http.NewRequest(http.MethodPost, "/", strings.NewReader("hello, world"))
	if _, err := ReadRequest(conn, r, 10, deadline, nil); FailureOf(r, err) != BodyTooLarge || len(conn.deadlines) != 1 {
		t.Errorf("over the limit: %v, deadlines %v", err, conn.deadlines)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	live, _ := http.NewRequest(http.MethodPost, "/", nil)
	for _, c := range []struct {
		r    *http.Request
		err  error
		want ReadFailure
	}{
		{live, ErrTooLarge, BodyTooLarge},
		{live, &http.MaxBytesError{Limit: 1}, BodyTooLarge},
		{live, fmt.Errorf("reading: %w", timeoutError{}), BodyTooSlow},
		{gone, io.ErrUnexpectedEOF, BodyAbandoned},
		{live, io.ErrUnexpectedEOF, BodyUnreadable},
	} {
		if got := FailureOf(c.r, c.err); got != c.want {
			t.Errorf("FailureOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
