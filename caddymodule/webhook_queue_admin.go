package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/queue"
	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(WebhookQueueAdmin{})
}

// WebhookQueueAdmin is the admin API of service_webhook's queues. Listings
// hold metadata only (id, organization, path, size, times, attempts, last
// answer), never a body or a signature.
//
//	GET    /service/webhook/queue                       deliveries waiting or in flight
//	GET    /service/webhook/dead                        dead letters
//	POST   /service/webhook/dead/replay?id=<id>          send a dead letter again
//	POST   /service/webhook/dead/replay?organization=<o> send every dead letter of an organization again
//	DELETE /service/webhook/dead?id=<id>                 drop a dead letter
type WebhookQueueAdmin struct{}

// CaddyModule returns the Caddy module information.
func (WebhookQueueAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_webhook_queue",
		New: func() caddy.Module { return new(WebhookQueueAdmin) },
	}
}

// Routes returns the admin routes of the module.
func (WebhookQueueAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/service/webhook/queue", Handler: caddy.AdminHandlerFunc(listQueued)},
		{Pattern: "/service/webhook/dead", Handler: caddy.AdminHandlerFunc(deadLetters)},
		{Pattern: "/service/webhook/dead/replay", Handler: caddy.AdminHandlerFunc(replayDead)},
	}
}

// queueListing is one queue's part of a listing.
type queueListing struct {
	// Dir is the queue's directory, or, for a queue shared through
	// Redis, "redis", the Redis in words and the queue's keys (as the
	// queue's metrics name it: see cluster.Queue.Where).
	Dir        string       `json:"dir"`
	Deliveries []queue.Meta `json:"deliveries"`
}

// eachQueue calls fn for every open queue.
func eachQueue(fn func(dir string, q queue.Deliveries) error) error {
	var err error
	webhookQueues.Range(func(key, v any) bool {
		if p, ok := v.(pooledQueue); ok {
			err = fn(p.where, p.Deliveries)
		}
		return err == nil
	})
	return err
}

func listing(w http.ResponseWriter, r *http.Request, list func(queue.Deliveries) ([]queue.Meta, error)) error {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use GET")}
	}
	out := []queueListing{}
	err := eachQueue(func(dir string, q queue.Deliveries) error {
		ms, err := list(q)
		if ms == nil {
			ms = []queue.Meta{}
		}
		out = append(out, queueListing{Dir: dir, Deliveries: ms})
		return err
	})
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	body, _ := json.Marshal(map[string]any{"queues": out})
	respond.JSON(w, http.StatusOK, body)
	return nil
}

func listQueued(w http.ResponseWriter, r *http.Request) error {
	return listing(w, r, queue.Deliveries.Pending)
}

// deadLetters lists (GET) or drops (DELETE ?id=) dead letters.
func deadLetters(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodDelete {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, DELETE")
			return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use GET, or DELETE ?id=<id>")}
		}
		return listing(w, r, queue.Deliveries.Dead)
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("the id of the dead letter to drop is missing")}
	}
	return onOneQueue(w, id, "dropped", queue.Deliveries.Drop)
}

// replayDead sends one dead letter (?id=) or an organization's
// (?organization=) again.
func replayDead(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use POST ?id=<id> or ?organization=<organization>")}
	}
	id, org := r.URL.Query().Get("id"), r.URL.Query().Get("organization")
	switch {
	case id != "" && org == "":
		return onOneQueue(w, id, "replayed", queue.Deliveries.Replay)
	case org != "" && id == "":
		total := 0
		err := eachQueue(func(_ string, q queue.Deliveries) error {
			n, err := q.ReplayOrganization(org)
			total += n
			return err
		})
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
		}
		body, _ := json.Marshal(map[string]any{"organization": org, "replayed": total})
		respond.JSON(w, http.StatusOK, body)
		return nil
	default:
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("give either id or organization")}
	}
}

// onOneQueue applies op to the dead letter id in whichever queue holds it.
func onOneQueue(w http.ResponseWriter, id, done string, op func(queue.Deliveries, string) error) error {
	found := false
	err := eachQueue(func(_ string, q queue.Deliveries) error {
		err := op(q, id)
		if err == nil {
			found = true
			return errStopRange
		}
		if errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrNotOurs) {
			return nil
		}
		return err
	})
	if err != nil && !errors.Is(err, errStopRange) {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	if !found {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no dead letter %q", id)}
	}
	body, _ := json.Marshal(map[string]any{"id": id, done: true})
	respond.JSON(w, http.StatusOK, body)
	return nil
}

var errStopRange = errors.New("stop")

// Interface guard.
var _ caddy.AdminRouter = WebhookQueueAdmin{}
