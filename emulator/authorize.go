package emulator

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/servicegate/servicegate/respond"
)

// authorizeRequest is the authorization request, from the query of GET or
// the consent form of POST.
type authorizeRequest struct {
	clientID     string
	redirectURI  string
	responseType string
	scope        string
	state        string
	hasState     bool
	decision     string
	organization string
	user         string
}

func readAuthorizeRequest(v url.Values) authorizeRequest {
	_, hasState := v["state"]
	return authorizeRequest{
		clientID:     v.Get("client_id"),
		redirectURI:  v.Get("redirect_uri"),
		responseType: v.Get("response_type"),
		scope:        v.Get("scope"),
		state:        v.Get("state"),
		hasState:     hasState,
		decision:     v.Get("decision"),
		organization: v.Get("organization"),
		user:         v.Get("user"),
	}
}

func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	var values url.Values
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		values = r.URL.Query()
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxTokenBody)
		if err := r.ParseForm(); err != nil {
			writeErrorPage(w, http.StatusBadRequest, "The consent form could not be read.")
			return
		}
		values = r.PostForm
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeErrorPage(w, http.StatusMethodNotAllowed, "The authorization endpoint takes GET, or POST from its consent form.")
		return
	}
	req := readAuthorizeRequest(values)

	// Errors about the client or the redirect URI are shown here, never
	// sent to a redirect URI that is not known to be the app's.
	// The messages say what came and what is registered (client ids and
	// redirect URLs are public): the person reading them is setting up
	// an app against the emulator.
	switch {
	case req.clientID == "":
		writeErrorPage(w, http.StatusBadRequest, "This app is unknown: the request has no client_id. The emulator knows the app as "+respond.Quote(s.cfg.ClientID)+".")
		return
	case req.clientID != s.cfg.ClientID:
		writeErrorPage(w, http.StatusBadRequest, "This app is unknown: client_id "+respond.Quote(req.clientID)+" is not registered. The emulator knows the app as "+respond.Quote(s.cfg.ClientID)+".")
		return
	case req.redirectURI == "":
		writeErrorPage(w, http.StatusBadRequest, "The request has no redirect_uri. The app's registered redirect URLs: "+s.registeredRedirects()+".")
		return
	case !s.redirects[req.redirectURI]:
		writeErrorPage(w, http.StatusBadRequest, "The redirect_uri "+respond.Quote(req.redirectURI)+" is not one of the app's registered redirect URLs: "+s.registeredRedirects()+".")
		return
	}
	if req.responseType != "code" {
		s.redirectWith(w, r, req, url.Values{"error": {"unsupported_response_type"},
			"error_description": {"response_type must be code"}})
		return
	}
	if req.scope == "" {
		s.redirectWith(w, r, req, url.Values{"error": {"invalid_request"},
			"error_description": {"scope is required"}})
		return
	}
	org, ok := s.chosenOrganization(req.organization)
	noteOrganization(r, org.Domain)
	if !ok {
		writeErrorPage(w, http.StatusBadRequest, "The chosen organization is not one of the emulator's organizations.")
		return
	}
	user := s.cfg.UserID
	if req.user != "" {
		n, err := strconv.ParseInt(req.user, 10, 64)
		if err != nil || n <= 0 {
			writeErrorPage(w, http.StatusBadRequest, "The user must be a positive integer id.")
			return
		}
		user = n
	}

	switch req.decision {
	case "approve":
		code, ok := s.newCode(req.redirectURI, user, org)
		if !ok {
			writeErrorPage(w, http.StatusServiceUnavailable, "Too many authorization codes are waiting to be exchanged. Try again in a minute.")
			return
		}
		s.redirectWith(w, r, req, url.Values{"code": {code}})
	case "decline":
		s.redirectWith(w, r, req, url.Values{"error": {"access_denied"}})
	case "":
		s.writeConsentPage(w, req, org, user)
	default:
		writeErrorPage(w, http.StatusBadRequest, "The decision must be approve or decline.")
	}
}

// chosenOrganization is the organization named by domain, or the first one
// configured when domain is empty (the zero Organization when there is none).
func (s *Server) chosenOrganization(domain string) (Organization, bool) {
	if domain == "" {
		orgs := s.Organizations()
		if len(orgs) == 0 {
			return Organization{}, true
		}
		return orgs[0], true
	}
	return s.organization(domain)
}

// redirectWith sends the user back to the app's registered redirect URI
// with params, and state when the request carried one.
func (s *Server) redirectWith(w http.ResponseWriter, r *http.Request, req authorizeRequest, params url.Values) {
	u, err := url.Parse(req.redirectURI) // registered, so it parses
	if err != nil {
		writeErrorPage(w, http.StatusInternalServerError, "The redirect URI could not be read.")
		return
	}
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	if req.hasState {
		q.Set("state", req.state)
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusFound)
}

// emulatorNote is the small print of the emulator's pages.
const emulatorNote = "Service emulator: a development stand-in for the service."

// writePage writes a page of the emulator with the headers of every page
// servicegate writes.
func writePage(w http.ResponseWriter, status int, t *template.Template, data any) {
	respond.SetPageHeaders(w.Header())
	w.WriteHeader(status)
	_ = t.Execute(w, data)
}

// writeErrorPage writes a page that says why an authorization request
// was not answered.
// registeredRedirects lists the app's redirect URLs for a message.
func (s *Server) registeredRedirects() string {
	quoted := make([]string, 0, len(s.cfg.RedirectURIs))
	for _, u := range s.cfg.RedirectURIs {
		quoted = append(quoted, respond.Quote(u))
	}
	if len(quoted) == 0 {
		return "none"
	}
	return strings.Join(quoted, ", ")
}

func writeErrorPage(w http.ResponseWriter, status int, message string) {
	respond.WritePage(w, status, respond.Page{Title: "Authorization error", Message: message, Note: emulatorNote})
}

var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize {{.ClientID}}</title></head>
<body>
<h1>Authorize {{.ClientID}}</h1>
<p>The app <strong>{{.ClientID}}</strong> asks for access ({{.Scope}}) on your behalf.</p>
<form method="post" action="authorize">
<input type="hidden" name="client_id" value="{{.ClientID}}">
<input type="hidden" name="redirect_uri" value="{{.RedirectURI}}">
<input type="hidden" name="response_type" value="code">
<input type="hidden" name="scope" value="{{.Scope}}">
{{if .HasState}}<input type="hidden" name="state" value="{{.State}}">{{end}}
{{if .Organizations}}<p><label>Organization
<select name="organization">{{range .Organizations}}
<option value="{{.Domain}}"{{if eq .Domain $.Chosen}} selected{{end}}>{{.Domain}} (id {{.ID}})</option>{{end}}
</select></label></p>{{end}}
<p><label>User id <input type="number" name="user" min="1" value="{{.User}}"></label></p>
<p><button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="decline">Decline</button></p>
</form>
<p><small>{{.Note}}</small></p>
</body></html>
`))

func (s *Server) writeConsentPage(w http.ResponseWriter, req authorizeRequest, org Organization, user int64) {
	writePage(w, http.StatusOK, consentPage, struct {
		ClientID, RedirectURI, Scope, State string
		HasState                            bool
		Organizations                       []Organization
		Chosen                              string
		User                                int64
		Note                                string
	}{req.clientID, req.redirectURI, req.scope, req.state, req.hasState, s.Organizations(), org.Domain, user, emulatorNote})
}
