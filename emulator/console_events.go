package emulator

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// serveEvents streams the calls as Server-Sent Events: "event: call", the
// call's id as the event's id, its item as data. Without Last-Event-ID the
// stream starts with the next call; with one, the calls after it are sent
// first, or the whole log when the log no longer holds the call after it.
// An idle stream gets a comment every keepalive.
func (c *console) serveEvents(w http.ResponseWriter, r *http.Request) error {
	var pending []*callRecord
	var last int64
	var changed <-chan struct{}
	if lei, ok := r.Header["Last-Event-Id"]; ok {
		id, err := strconv.ParseInt(lei[0], 10, 64)
		if err != nil {
			id = -1 // not one of ours: the whole log
		}
		pending, changed = c.log.since(id)
		last = id
	} else {
		last, changed = c.log.last()
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriter(w)
	// The browser reconnects a second after a dropped stream.
	out.WriteString("retry: 1000\n\nevent: ready\ndata: {}\n\n")
	keepalive := time.NewTicker(c.keepalive)
	defer keepalive.Stop()
	end, _ := r.Context().Value(streamsEndKey{}).(<-chan struct{})
	for {
		for _, e := range pending {
			data, _ := json.Marshal(itemOf(e))
			out.WriteString("id: " + strconv.FormatInt(e.id, 10) + "\nevent: call\ndata: ")
			out.Write(data)
			out.WriteString("\n\n")
			last = e.id
		}
		if out.Flush() != nil || rc.Flush() != nil {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-end:
			return nil
		case <-keepalive.C:
			out.WriteString(": keepalive\n\n")
			pending = nil
		case <-changed:
			pending, changed = c.log.since(last)
		}
	}
}
