package health

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/servicegate/servicegate/queue"
	"github.com/servicegate/servicegate/respond"
)

// Timeout bounds one check of an App (a Redis ping, a file created in
// each disk queue's directory).
const Timeout = 2 * time.Second

// App is the health check of one app.
type App struct {
	// Name names the app: its descriptor's identifier, or its name.
	Name string
	// Path is where the app answers its health check; "" when it is off.
	Path string
	// Checker checks the app's parts.
	Checker Checker
}

// Check runs the app's check, bounded by Timeout.
func (a *App) Check(ctx context.Context) Report {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return a.Checker.Check(ctx)
}

// Serve answers the app's health endpoint: GET or HEAD, 200 while the app
// serves (ok or degraded) and 503 when it is unavailable, with the public
// report (each part's name and state, nothing of where it is or what
// failed). Another method is refused 405 through refuse, with Allow set.
func (a *App) Serve(w http.ResponseWriter, r *http.Request,
	refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, r, http.StatusMethodNotAllowed, "The health check answers GET and HEAD only.")
	}
	rep := a.Check(r.Context())
	body, err := json.Marshal(rep.Public())
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.HTTPStatus())
		return nil
	}
	respond.JSON(w, rep.HTTPStatus(), body)
	return nil
}

// Registry holds the health checks of the apps of the loaded configs, by
// their owner (one per config's app block), for the admin API and metrics.
type Registry struct{ apps sync.Map }

// Store files the check of owner's app, in place of any before.
func (g *Registry) Store(owner any, a *App) { g.apps.Store(owner, a) }

// Delete forgets owner's check.
func (g *Registry) Delete(owner any) { g.apps.Delete(owner) }

// Load returns owner's check.
func (g *Registry) Load(owner any) (*App, bool) {
	v, ok := g.apps.Load(owner)
	if !ok {
		return nil, false
	}
	return v.(*App), true
}

// each calls fn with every check.
func (g *Registry) each(fn func(*App)) {
	g.apps.Range(func(_, v any) bool { fn(v.(*App)); return true })
}

// AppReport is one app's part of a Registry's report.
type AppReport struct {
	App  string `json:"app"`
	Path string `json:"path,omitempty"`
	Report
}

// RegistryReport is the state of every app, in full: its JSON is the
// admin API's answer.
type RegistryReport struct {
	// Status is the worst of the apps'.
	Status string      `json:"status"`
	Apps   []AppReport `json:"apps"`
}

// Report checks every app, sorted by name.
func (g *Registry) Report(ctx context.Context) RegistryReport {
	out := RegistryReport{Status: StatusOK, Apps: []AppReport{}}
	g.each(func(a *App) {
		out.Apps = append(out.Apps, AppReport{App: a.Name, Path: a.Path, Report: a.Check(ctx)})
	})
	slices.SortFunc(out.Apps, func(x, y AppReport) int { return cmp.Compare(x.App, y.App) })
	for _, a := range out.Apps {
		if worse(a.Status, out.Status) {
			out.Status = a.Status
		}
	}
	return out
}

// HTTPStatus is 503 when an app is unavailable, else 200.
func (r *RegistryReport) HTTPStatus() int { return httpStatus(r.Status) }

// DescriptorSummary is the state of an app's descriptors across the
// checks that name it (two blocks of one app, or the old and the new
// config during a reload), as metrics report it: the older copy.
type DescriptorSummary struct {
	// NotRead: one of them awaits its descriptor.
	NotRead bool
	// Stale: one of them serves the last good copy.
	Stale bool
	// ReadAt is when the oldest copy in use was read; zero when none.
	ReadAt time.Time
}

// Descriptors summarizes the descriptors of the checks, by app name.
func (g *Registry) Descriptors() map[string]DescriptorSummary {
	byApp := map[string]DescriptorSummary{}
	g.each(func(a *App) {
		if a.Checker.Descriptor == nil {
			return
		}
		d := a.Checker.Descriptor()
		s := byApp[a.Name]
		switch d.State {
		case DescriptorNotRead:
			s.NotRead = true
		case DescriptorLastGood:
			s.Stale = true
		}
		if !d.At.IsZero() && (s.ReadAt.IsZero() || d.At.Before(s.ReadAt)) {
			s.ReadAt = d.At
		}
		byApp[a.Name] = s
	})
	return byApp
}

// QueueSource is where a check reads one webhook queue.
type QueueSource struct {
	// Where names the queue: see Queue.Where.
	Where string
	// Shared: see Queue.Shared.
	Shared bool
	// Stats returns the queue's depth and its oldest delivery now.
	Stats func() queue.Stats
	// Writable: see Queue.Writable.
	Writable func(ctx context.Context) error
}

// QueuesOf is a Checker's Queues that reads sources at each check; nil
// when there are none.
func QueuesOf(sources []QueueSource) func() []Queue {
	if len(sources) == 0 {
		return nil
	}
	return func() []Queue {
		out := make([]Queue, len(sources))
		for i, q := range sources {
			s := q.Stats()
			out[i] = Queue{Where: q.Where, Shared: q.Shared, Depth: s.Depth, Oldest: s.Oldest, Writable: q.Writable}
		}
		return out
	}
}
