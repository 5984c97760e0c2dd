package emulator

import (
	"net/http"
	"strconv"
	"time"

	"github.com/servicegate/servicegate/token"
)

// serveSubscription answers GET /api/v2/applications/{app}/subscription.
func (s *Server) serveSubscription(w http.ResponseWriter, r *http.Request, app string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, message("The subscription query takes GET."))
		return
	}
	raw, _ := token.FromAuthorization(r.Header.Get("Authorization"))
	if raw == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="service-emulator"`)
		writeJSON(w, http.StatusUnauthorized, message("An access token is required: Authorization: Bearer <token>."))
		return
	}
	org, err := s.verifyToken(raw)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="service-emulator", error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, message("The access token is invalid or has expired."))
		return
	}
	s.countQuery(organizationKey(org.domain, org.id))
	noteOrganization(r, organizationKey(org.domain, org.id))
	if fault(w, r, s.Faults().Subscription, func(status int) {
		writeJSON(w, status, message("The subscription query answers "+strconv.Itoa(status)+" (a fault set in the emulator's console)."))
	}) {
		return
	}

	if d := time.Duration(s.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if s.outage.Load() {
		writeJSON(w, http.StatusServiceUnavailable, message("The service is unavailable (emulated outage)."))
		return
	}
	if app != s.cfg.AppIdentifier {
		writeJSON(w, http.StatusBadRequest, message("Application not found"))
		return
	}
	var known Organization
	var ok bool
	if org.domain != "" {
		known, ok = s.organization(org.domain)
	} else if org.id > 0 {
		known, ok = s.organizationByID(org.id)
	}
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, message("Organization not found"))
	case !known.ActiveUntil.IsZero():
		writeJSON(w, http.StatusOK, map[string]string{"expires": known.ActiveUntil.Format(ExpiresLayout)})
	case known.SubscribeLink != "":
		writeJSON(w, http.StatusPaymentRequired, map[string]string{"subscribe_link": known.SubscribeLink})
	default:
		writeJSON(w, http.StatusNotFound, message("Subscription not found"))
	}
}

func message(text string) map[string]string { return map[string]string{"message": text} }
