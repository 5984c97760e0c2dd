package modulecall

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/spans"
)

// Spill hands an app's answer that is larger than MaxResponseSize to the
// service by URL: its strings (as new-line delimited JSON), file content
// or preview are stored, and the answer carries stringsUrl, contentUrl or
// previewUrl instead. The URLs are served by the Handler under Path,
// signed, expiring, and good for one download.
type Spill struct {
	// Path is the path prefix of the payload URLs, starting and ending
	// with /.
	Path string
	// BaseURL is the scheme and host (and any path prefix) of the payload
	// URLs, without a trailing /; empty asks Origin for each answer.
	BaseURL string
	// Origin is the scheme and host of the site a request is for, when
	// BaseURL is empty; an error refuses the answer over MaxResponseSize.
	// It must not take the request's Host header as it comes: the client
	// chooses it.
	Origin func(*http.Request) (string, error)
	// Dir is the directory the answers are read to, beyond
	// MaxResponseSize; NewHandler creates it (0700) if need be.
	Dir string
	// MaxSize is the largest answer the app may give, when spilling.
	MaxSize int64
	// Store keeps the payloads and signs their links. Required. A
	// *contract.Store, on disk, is swept of expired payloads every so
	// often (half its TTL, at most a minute), from NewHandler until Close.
	Store contract.Payloads
}

// serveSpilled answers a download of a stored payload: once, while its
// signed URL is valid; any other request of the path gets 403, and 503 when
// the payloads cannot be reached (kept in Redis).
func (h *Handler) serveSpilled(w http.ResponseWriter, r *http.Request) (err error) {
	_, span := spans.Start(r.Context(), "servicegate.spill.download")
	status := 0 // of the refusal
	defer func() { span.EndRefused(status, err) }()
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		status = http.StatusMethodNotAllowed
		return h.refuse(w, r, status, "Payload links are downloaded with GET.")
	}
	name := strings.TrimPrefix(r.URL.Path, h.cfg.Spill.Path)
	f, err := h.cfg.Spill.Store.Take(name, r.URL.Query())
	if err != nil && !errors.Is(err, contract.ErrLinkInvalid) {
		// The store logs the failure, once in a while.
		h.report(SpillUnavailable)
		w.Header().Set("Retry-After", "5")
		status = http.StatusServiceUnavailable
		return h.refuse(w, r, status, "The stored answer cannot be reached right now. Try the download again in a moment.")
	}
	if err != nil {
		h.report(SpillRefused)
		status = http.StatusForbidden
		return h.refuse(w, r, status, "This link is invalid, was already used, or has expired. Run the job again for a new one.")
	}
	defer f.Close()
	h.report(SpillDownload)
	span.String("servicegate.spill.kind", strings.TrimPrefix(filepath.Ext(name), "."))
	span.Int("servicegate.spill.size", f.Size)
	hd := w.Header()
	switch filepath.Ext(name) {
	case contract.KindStrings:
		hd.Set("Content-Type", "application/x-ndjson")
	case contract.KindPreview:
		hd.Set("Content-Type", "text/html; charset=utf-8")
	default:
		hd.Set("Content-Type", "application/octet-stream")
	}
	hd.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f) // a failed copy means the client went away
	span.End()
	return nil
}

// spillAnswer stores the payloads of an answer over MaxResponseSize and
// sends the answer that carries their URLs instead; when it cannot, it
// removes what it stored and refuses the answer as too large.
func (h *Handler) spillAnswer(w http.ResponseWriter, r *http.Request, sb *limits.SpillBuffer) (err error) {
	_, span := spans.Start(r.Context(), "servicegate.spill.store")
	status := 0 // of the refusal
	defer func() { span.EndRefused(status, err) }()
	span.Int("servicegate.spill.answer_size", sb.Size())
	s := h.cfg.Spill
	base := s.BaseURL
	if base == "" {
		base, err = s.Origin(r)
	}
	var stored []string
	put := func(kind string, write func(io.Writer) error) (string, error) {
		f, name, err := s.Store.Create(kind)
		if err != nil {
			return "", err
		}
		stored = append(stored, name)
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		return base + s.Path + name + "?" + s.Store.Link(name), nil
	}
	var out bytes.Buffer
	if err == nil {
		err = contract.SpillAnswer(sb.Reader(), &out, put)
	}
	if err == nil && int64(out.Len()) > h.cfg.MaxResponseSize {
		err = errors.New("the answer is still too large without its strings, content and preview")
	}
	if err != nil {
		for _, name := range stored {
			s.Store.Remove(name)
		}
		h.report(ResponseTooLarge)
		h.log.Info("app answer over the size limit could not be handed over by URL", zap.String("path", r.URL.Path), zap.Int64("size", sb.Size()), zap.Error(err))
		status = http.StatusBadGateway
		return h.refuse(w, r, status, tooLargeMessage(limits.SizeName(sb.Size()), h.cfg.MaxResponseSize))
	}
	h.report(Spilled)
	span.Int("servicegate.spill.payloads", int64(len(stored)))
	h.log.Debug("app answer handed over by URL", zap.String("path", r.URL.Path), zap.Int64("size", sb.Size()), zap.Int("payloads", len(stored)))
	hd := w.Header()
	clear(hd)
	for k, v := range sb.Header() {
		hd[k] = v
	}
	hd.Del("Content-Encoding")
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(out.Len()))
	span.End()
	w.WriteHeader(sb.Status())
	_, _ = w.Write(out.Bytes())
	return nil
}

// sweepExpired removes the expired payloads of store every so often (half
// its TTL, at most a minute) until stop is closed, logging how many it
// removed.
func sweepExpired(store *contract.Store, stop <-chan struct{}, log *zap.Logger) {
	every := min(store.TTL/2, time.Minute)
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if n := store.Sweep(); n > 0 {
				log.Debug("expired payloads removed", zap.Int("count", n))
			}
		}
	}
}

// Close stops the sweeping of expired payloads on disk, and returns once
// it has stopped. Serve still works after it.
func (h *Handler) Close() error {
	if h.stopSweeping != nil {
		h.closeOnce.Do(func() { close(h.stopSweeping) })
		<-h.swept
	}
	return nil
}
