package emulator

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/servicegate/servicegate/respond"
)

// kindUser is a request the console made as a user of an organization.
const kindUser = "user"

// userRequest asks the console to send a request to the app, through the
// gateway, as a user of an organization.
type userRequest struct {
	// Path is the path (and query) at the app, from its base address.
	Path string `json:"path"`
	// Method is the request's method; default GET.
	Method string `json:"method"`
	// User is the user's id; default the emulator's user.
	User int64 `json:"user"`
}

// userMethods are the methods a request as a user may take.
var userMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// asUser sends the request of r's body to the app through the gateway
// with a token the emulator mints for a user of org, as the service's
// page of the app does, and returns the call.
func (c *console) asUser(ctx context.Context, w http.ResponseWriter, r *http.Request, org Organization) ([]Call, error) {
	var req userRequest
	if err := readRequest(w, r, &req); err != nil {
		return nil, err
	}
	if req.Path == "" || req.Path[0] != '/' || strings.HasPrefix(req.Path, "//") || strings.ContainsAny(req.Path, " \t\r\n#") {
		return nil, failf(http.StatusBadRequest, "path must be a path at the app, such as /api/projects: it starts with one slash and holds no spaces.")
	}
	if _, err := url.ParseRequestURI(req.Path); err != nil {
		return nil, failf(http.StatusBadRequest, "path %s is not a path at the app.", respond.Quote(req.Path))
	}
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = http.MethodGet
	}
	if !slices.Contains(userMethods, method) {
		return nil, failf(http.StatusBadRequest, "method must be one of %s.", strings.Join(userMethods, ", "))
	}
	user := req.User
	if user == 0 {
		user = c.s.cfg.UserID
	}
	if user < 0 {
		return nil, failf(http.StatusBadRequest, "user must be a user's id, a positive integer.")
	}
	token, err := MintToken(c.s.cfg.ClientSecret, Token{Issuer: c.s.cfg.Issuer, Audience: c.s.cfg.ClientID, UserID: user,
		OrganizationID: org.ID, Domain: org.Domain, IssuedAt: c.s.cfg.Now(), Lifetime: c.s.cfg.TokenLifetime})
	if err != nil {
		return nil, failf(http.StatusInternalServerError, "The user's token could not be made.")
	}
	header := http.Header{}
	header.Set("Authorization", "Bearer "+token)
	header.Set("Accept", "application/json")
	ctx = withCall(ctx, callMeta{kind: kindUser, org: org.Domain})
	id, err := c.send(ctx, method, c.cfg.App+req.Path, header, nil)
	if err != nil {
		return nil, err
	}
	return []Call{{ID: id}}, nil
}

// gatewayCache says what became of the subscription answers a gateway
// caches after the console changed a subscription.
type gatewayCache struct {
	// State is "forgotten": the gateway of the emulator's process forgot
	// them, and its next request asks the service again; or "kept": no
	// gateway of this process caches subscriptions, and one elsewhere
	// keeps its answer until its expires or a purge.
	State string `json:"state"`
	// Purge is the command that makes a gateway elsewhere forget the
	// organization's answers at once (its admin API).
	Purge string `json:"purge,omitempty"`
}

// forgetSubscription tells the gateway of the emulator's process, if it
// caches subscriptions, to forget what it cached of org.
func (c *console) forgetSubscription(org Organization) *gatewayCache {
	if f := c.cfg.ForgetSubscription; f != nil && f(org.Domain, itoa(org.ID)) {
		return &gatewayCache{State: "forgotten"}
	}
	return &gatewayCache{State: "kept",
		Purge: "curl -X DELETE 'http://localhost:2019/service/subscription/cache?organization=" + url.QueryEscape(org.Domain) + "'"}
}
