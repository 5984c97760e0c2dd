package approute

import (
	"errors"
	"net/http"

	"github.com/servicegate/servicegate/siteorigin"
)

// Descriptor routes path to the app descriptor, served read-only (GET and
// HEAD) as body returns it for the request. An error of body saying that
// the site's public address is not known (siteorigin.ErrNoHost) refuses the
// request 500 with its message, which tells the host what to set; any other
// is returned as it is, for the caller to answer without showing it.
func (rt *Router) Descriptor(path string, body func(*http.Request) ([]byte, error)) {
	rt.descPath = path
	rt.descriptor = func(w http.ResponseWriter, r *http.Request, _ Next) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return rt.cfg.Refuse(w, r, http.StatusMethodNotAllowed, "The app descriptor is read-only.")
		}
		b, err := body(r)
		if errors.Is(err, siteorigin.ErrNoHost) {
			return rt.cfg.Refuse(w, r, http.StatusInternalServerError, "The app descriptor cannot be served: "+err.Error())
		}
		if err != nil {
			return err
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
