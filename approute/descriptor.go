package approute

import "net/http"

// Descriptor routes path to the app descriptor, served read-only (GET and
// HEAD) as body returns it for the request. An error of body refuses the
// request 500 with its message: it must be written for a person, such as
// the site's public address not being known.
func (rt *Router) Descriptor(path string, body func(*http.Request) ([]byte, error)) {
	rt.descPath = path
	rt.descriptor = func(w http.ResponseWriter, r *http.Request, _ Next) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return rt.cfg.Refuse(w, r, http.StatusMethodNotAllowed, "The app descriptor is read-only.")
		}
		b, err := body(r)
		if err != nil {
			return rt.cfg.Refuse(w, r, http.StatusInternalServerError, "The app descriptor cannot be served: "+err.Error())
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
		return nil
	}
}
