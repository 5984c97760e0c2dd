package emulator

import (
	"net/http"
	"sync"
	"time"
)

// The kinds of calls, as the console's API and page name them.
const (
	kindInstalled        = EventInstalled
	kindUninstall        = EventUninstall
	kindSubscriptionPaid = EventSubscriptionPaid
	kindDelivery         = "delivery"
	kindParseFile        = "parse-file"
	kindBuildFile        = "build-file"
	kindPreExport        = "file-pre-export"
	kindToken            = "token"
	kindAuthorize        = "authorize"
	kindSubscription     = "subscription"
)

// Bounds of what the console keeps of one call.
const (
	// maxKeptBody caps each body kept; the size of the whole is kept
	// beside it.
	maxKeptBody = 64 << 10
	// maxKeptHeaders caps the header fields kept of a request or an
	// answer, and maxKeptHeaderValue each value.
	maxKeptHeaders     = 64
	maxKeptHeaderValue = 4 << 10
	// DefaultKeep is how many calls the console keeps by default.
	DefaultKeep = 1000
	// MaxKeep bounds ConsoleConfig.Keep.
	MaxKeep = 100_000
)

// callRecord is one HTTP exchange the emulator took part in, as the console
// keeps it: complete, and never changed once in the log.
type callRecord struct {
	id       int64
	start    time.Time
	duration time.Duration
	kind     string
	org      string
	// module is the key of the module called, if any.
	module string
	method string
	url    string
	// sent: the emulator sent the request (to the app, through the
	// gateway); else it answered it.
	sent   bool
	status int
	// err says why no answer came.
	err     string
	verdict Verdict

	reqHeader, respHeader http.Header
	reqBody, respBody     keptBody
	// app is what the app received and answered, when a gateway of the
	// same process handed the call on to it.
	app *appSide

	// replayOf is the call this one replays or resends, and tamper how
	// it was tampered with.
	replayOf int64
	tamper   string
}

// keptBody is a body as the console keeps it: at most maxKeptBody bytes,
// and the size of the whole.
type keptBody struct {
	data []byte
	size int64
}

// whole reports whether the body was kept entire.
func (b keptBody) whole() bool { return int64(len(b.data)) == b.size }

// keepBody keeps the start of data.
func keepBody(data []byte) keptBody {
	kept := data
	if len(kept) > maxKeptBody {
		kept = kept[:maxKeptBody]
	}
	return keptBody{data: append([]byte(nil), kept...), size: int64(len(data))}
}

// keepHeader copies h within the bounds.
func keepHeader(h http.Header) http.Header {
	out := make(http.Header, min(len(h), maxKeptHeaders))
	for name, values := range h {
		if len(out) == maxKeptHeaders {
			break
		}
		if name == CallHeader {
			continue
		}
		kept := make([]string, 0, len(values))
		for _, v := range values {
			if len(v) > maxKeptHeaderValue {
				v = v[:maxKeptHeaderValue]
			}
			kept = append(kept, v)
		}
		out[name] = kept
	}
	return out
}

// callLog is the console's bounded log of calls: the last keep of them,
// numbered from 1 in the order they completed.
type callLog struct {
	mu     sync.Mutex
	ring   []*callRecord // in id order from head, wrapping around
	head   int
	keep   int
	lastID int64
	// changed is closed, and replaced, when a call is added.
	changed chan struct{}
}

func newCallLog(keep int) *callLog {
	return &callLog{keep: keep, ring: make([]*callRecord, 0, min(keep, 64)), changed: make(chan struct{})}
}

// add numbers e, puts it in the log (dropping the oldest call when the
// log is full) and wakes whoever waits for calls.
func (l *callLog) add(e *callRecord) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastID++
	e.id = l.lastID
	if len(l.ring) < l.keep {
		l.ring = append(l.ring, e)
	} else {
		l.ring[l.head] = e
		l.head = (l.head + 1) % l.keep
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return e.id
}

// at is the i-th oldest call. l.mu is held.
func (l *callLog) at(i int) *callRecord { return l.ring[(l.head+i)%len(l.ring)] }

// get is the call of id, or nil when it is not (or no longer) in the log.
func (l *callLog) get(id int64) *callRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) == 0 {
		return nil
	}
	first := l.at(0).id
	if id < first || id > l.lastID {
		return nil
	}
	return l.at(int(id - first))
}

// since returns the calls after id, oldest first, and a channel closed
// when the next call is added. An id the log no longer holds the call
// after (dropped, or from before the emulator started) gives the whole
// log.
func (l *callLog) since(id int64) ([]*callRecord, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.ring)
	start := 0
	if n > 0 {
		first := l.at(0).id
		if id >= first-1 && id <= l.lastID {
			start = int(id - first + 1)
		}
	}
	out := make([]*callRecord, 0, n-start)
	for i := start; i < n; i++ {
		out = append(out, l.at(i))
	}
	return out, l.changed
}

// last is the id of the last call added, 0 before the first, and a
// channel closed when the next call is added.
func (l *callLog) last() (int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastID, l.changed
}
