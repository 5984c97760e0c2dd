package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/servicegate/servicegate/queue"
)

// TestRegistry: the report sorts the apps and takes the worst status of
// theirs;
// the descriptor summary reports, per app name, the older copy, and any
// block that awaits its descriptor or serves a last good copy.
func TestRegistry(t *testing.T) {
	var g Registry
	old, newer := time.Unix(1000, 0), time.Unix(2000, 0)
	g.Store(1, &App{Name: "b", Checker: Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorRead, At: newer} }}})
	g.Store(2, &App{Name: "b", Checker: Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorLastGood, At: old} }}})
	g.Store(3, &App{Name: "a", Path: "/h", Checker: Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorNotRead} }}})
	rep := g.Report(context.Background())
	if rep.Status != StatusUnavailable || rep.HTTPStatus() != http.StatusServiceUnavailable || len(rep.Apps) != 3 || rep.Apps[0].App != "a" || rep.Apps[0].Path != "/h" {
		t.Errorf("report %+v", rep)
	}
	d := g.Descriptors()
	if !d["a"].NotRead || d["b"].NotRead || !d["b"].Stale || !d["b"].ReadAt.Equal(old) {
		t.Errorf("descriptors %+v", d)
	}
	g.Delete(3)
	if _, ok := g.Load(3); ok {
		t.Error("deleted, still loaded")
	}
	if rep := g.Report(context.Background()); rep.Status != StatusDegraded || rep.HTTPStatus() != http.StatusOK {
		t.Errorf("without the app awaiting its descriptor, one on its last good copy: %+v", rep)
	}
}

// TestAppServe: GET answers the public report (no place, no error),
// HEAD its status alone, another method is refused with Allow; queues are
// read at each check.
func TestAppServe(t *testing.T) {
	depth := 0
	a := &App{Name: "a", Checker: Checker{Queues: QueuesOf([]QueueSource{{Where: "/var/lib/q",
		Stats:    func() queue.Stats { depth++; return queue.Stats{Depth: depth} },
		Writable: func(context.Context) error { return errors.New("read-only") }}})}}
	refuse := func(w http.ResponseWriter, _ *http.Request, status int, _ string) error {
		w.WriteHeader(status)
		return nil
	}
	for method, want := range map[string]int{"GET": 503, "HEAD": 503, "POST": 405} {
		w := httptest.NewRecorder()
		if err := a.Serve(w, httptest.NewRequest(method, "/h", nil), refuse); err != nil || w.Code != want {
			t.Errorf("%s: %d %v", method, w.Code, err)
		}
		if method == "GET" && (w.Header().Get("Cache-Control") != "no-store" ||
			w.Body.String() != `{"status":"unavailable","checks":[{"name":"webhook_queue","state":"not_writable"}]}`+"\n") {
			t.Errorf("GET: %v %s", w.Header(), w.Body)
		}
		if method == "POST" && w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("POST: Allow %q", w.Header().Get("Allow"))
		}
	}
	if depth != 2 || QueuesOf(nil) != nil {
		t.Errorf("queues read %d times", depth)
	}
}
