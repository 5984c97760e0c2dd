package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/servicegate/servicegate/oauth"
)

func TestServiceOAuthCaddyfile(t *testing.T) {
	m := new(ServiceOAuth)
	err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`service_oauth {
		client_id demo-client
		client_secret {env.CLIENT_SECRET}
		auth_url https://accounts.service.example
		scopes project
		scopes tm
		redirect_uri /auth/cb
		logout_path /auth/out
		logout_redirect /bye
		cookie_name app_sid
		cookie_secure off
		cookie_domain example.com
		cookie_path /app
		session_lifetime 8h
		session_store storage
		max_sessions 50
		user_header X-User
		organization_header off
		timeout 3s
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.ClientID != "demo-client" || m.ClientSecret != "{env.CLIENT_SECRET}" || m.AuthURL != "https://accounts.service.example" ||
		strings.Join(m.Scopes, " ") != "project tm" || m.RedirectURI != "/auth/cb" || m.LogoutPath != "/auth/out" ||
		m.LogoutRedirect != "/bye" || m.CookieName != "app_sid" || m.CookieSecure == nil || *m.CookieSecure ||
		m.CookieDomain != "example.com" || m.CookiePath != "/app" || time.Duration(m.SessionLifetime) != 8*time.Hour ||
		m.SessionStore != "storage" || m.MaxSessions != 50 || m.UserHeader != "X-User" || m.OrganizationHeader != "off" ||
		time.Duration(m.Timeout) != 3*time.Second {
		t.Fatalf("parsed %+v", m)
	}
}

func TestServiceOAuthCaddyfileErrors(t *testing.T) {
	const base = "client_id c\nclient_secret s\nauth_url https://a.example\nscopes project\n"
	tests := []struct{ name, block, want string }{
		{"no scopes", "client_id c\nclient_secret s\nauth_url https://a.example", "needs client_id, client_secret, auth_url and scopes"},
		{"no secret", "client_id c\nauth_url https://a.example\nscopes p", "needs client_id"},
		{"empty scopes", base + "scopes", "wrong argument count"},
		{"two ids", "client_id a b\nclient_secret s\nauth_url https://a.example\nscopes project", "wrong argument count"},
		{"client_id twice", base + "client_id a", "client_id given more than once"},
		{"cookie_secure", base + "cookie_secure yes", "must be on or off"},
		{"session_store", base + "session_store disk", "must be memory, storage or redis"},
		{"max_sessions", base + "max_sessions lots", "not a positive integer"},
		{"zero max_sessions", base + "max_sessions 0", "not a positive integer"},
		{"lifetime", base + "session_lifetime forever", "not a positive duration"},
		{"timeout", base + "timeout -1s", "not a positive duration"},
		{"unknown", base + "scope project", `unrecognized service_oauth sub-directive "scope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(ServiceOAuth).UnmarshalCaddyfile(caddyfile.NewTestDispenser("service_oauth {\n" + tt.block + "\n}"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := new(ServiceOAuth).UnmarshalCaddyfile(caddyfile.NewTestDispenser("service_oauth extra {\n" + base + "}")); err == nil {
		t.Fatal("an argument on the directive line was accepted")
	}
}

func TestServiceOAuthValidate(t *testing.T) {
	valid := func() *ServiceOAuth {
		return &ServiceOAuth{AuthURL: "https://a.example", Scopes: []string{"project"}, RedirectURI: "/oauth/callback",
			LogoutPath: "/oauth/logout", CookieName: "sid", SessionStore: "memory"}
	}
	tests := []struct {
		name   string
		change func(*ServiceOAuth)
		want   string
	}{
		{"valid", func(*ServiceOAuth) {}, ""},
		{"absolute redirect", func(m *ServiceOAuth) { m.RedirectURI = "https://app.example/cb" }, ""},
		{"redirect without path", func(m *ServiceOAuth) { m.RedirectURI = "https://app.example" }, "needs a path"},
		{"relative redirect", func(m *ServiceOAuth) { m.RedirectURI = "cb" }, "must be a path or an absolute"},
		{"ftp redirect", func(m *ServiceOAuth) { m.RedirectURI = "ftp://app.example/cb" }, "must be a path or an absolute"},
		{"redirect with fragment", func(m *ServiceOAuth) { m.RedirectURI = "https://app.example/cb#x" }, "must be a path or an absolute"},
		{"logout without slash", func(m *ServiceOAuth) { m.LogoutPath = "logout" }, "logout_path"},
		{"same paths", func(m *ServiceOAuth) { m.LogoutPath = "/oauth/callback" }, "must differ"},
		{"cookie name", func(m *ServiceOAuth) { m.CookieName = "a;b" }, "not a valid cookie name"},
		{"store", func(m *ServiceOAuth) { m.SessionStore = "disk" }, "session_store"},
		{"no auth_url", func(m *ServiceOAuth) { m.AuthURL = "" }, "auth_url is required"},
		{"no scopes", func(m *ServiceOAuth) { m.Scopes = nil }, "scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.change(m)
			err := m.Validate()
			if tt.want == "" && err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestServiceOAuthProvisionSecret(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	t.Setenv("SERVICEGATE_TEST_OAUTH_SECRET", "")
	m := &ServiceOAuth{ClientID: "c", ClientSecret: "{env.SERVICEGATE_TEST_OAUTH_SECRET}", AuthURL: "https://a.example", Scopes: []string{"p"}}
	if err := m.Provision(ctx); err == nil || !strings.Contains(err.Error(), "client_secret {env.SERVICEGATE_TEST_OAUTH_SECRET} is empty") {
		t.Fatalf("empty secret: %v", err)
	}
	t.Setenv("SERVICEGATE_TEST_OAUTH_SECRET", "s3cret-value")
	m = &ServiceOAuth{ClientID: "c", ClientSecret: "{env.SERVICEGATE_TEST_OAUTH_SECRET}", AuthURL: "https://a.example/", Scopes: []string{"p"}}
	if err := m.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Cleanup()
	if m.manager.Client.ClientSecret != "s3cret-value" || m.manager.Client.AuthURL != "https://a.example" ||
		m.callbackPath != oauthDefaultCallback || m.LogoutPath != oauthDefaultLogout || !m.secure || m.flow == nil ||
		m.CookieName+oauth.StateCookieSuffix != "servicegate_session_state" || m.UserHeader != "X-Service-User-Id" || m.OrganizationHeader != "X-Service-Domain" {
		t.Fatalf("provisioned %+v", m)
	}
}

func FuzzServiceOAuthCaddyfile(f *testing.F) {
	f.Add("service_oauth {\nclient_id c\nclient_secret s\nauth_url https://a\nscopes p q\ncookie_secure off\n}")
	f.Add("service_oauth {\nmax_sessions 9999999999999999999\n}")
	f.Add("service_oauth {\nsession_lifetime 1d\ntimeout }\n}")
	f.Add("service_oauth")
	f.Fuzz(func(t *testing.T, input string) {
		m := new(ServiceOAuth)
		if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
			return
		}
		if m.ClientID == "" || m.ClientSecret == "" || m.AuthURL == "" || len(m.Scopes) == 0 || m.MaxSessions < 0 ||
			m.SessionLifetime < 0 || m.Timeout < 0 {
			t.Fatalf("accepted an incomplete configuration: %+v", m)
		}
	})
}

// newBenchOAuth is a provisioned handler with one live session in memory.
func newBenchOAuth(b *testing.B) (*ServiceOAuth, string) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	m := &ServiceOAuth{ClientID: "c", ClientSecret: "s", AuthURL: "https://a.example", Scopes: []string{"p"}, MaxSessions: 17}
	if err := m.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Cleanup() })
	id := oauth.NewID()
	err := m.manager.Store.Put(context.Background(), id, oauth.Session{
		Token:        oauth.Token{AccessToken: "eyJ.access.token", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)},
		UserID:       "7",
		Organization: "acme.example",
		Expires:      time.Now().Add(time.Hour),
	})
	if err != nil {
		b.Fatal(err)
	}
	return m, id
}

func BenchmarkServiceOAuthSession(b *testing.B) {
	m, id := newBenchOAuth(b)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return nil })
	req := httptest.NewRequest(http.MethodGet, "/app", nil)
	cookies := []string{"servicegate_session=" + id}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		req.Header["Cookie"] = cookies
		if err := m.ServeHTTP(w, req, next); err != nil {
			b.Fatal(err)
		}
	}
	if req.Header.Get("Authorization") != "Bearer eyJ.access.token" {
		b.Fatal("the token was not passed on")
	}
}

func TestSweepOAuthStorage(t *testing.T) {
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	write := func(key string, age time.Duration) {
		t.Helper()
		if err := st.Store(ctx, key, []byte("sealed")); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(st.Filename(key), when, when); err != nil {
			t.Fatal(err)
		}
	}
	write(oauthLoginsPrefix+"/fresh-login", time.Minute)
	write(oauthLoginsPrefix+"/old-login", oauth.DefaultLoginLifetime+time.Minute)
	write(oauthStoragePrefix+"/fresh-session", 23*time.Hour)
	write(oauthStoragePrefix+"/old-session", 25*time.Hour)
	write("certificates/acme/keep-me", 1000*time.Hour)

	n := sweepStorageFolder(ctx, st, oauthLoginsPrefix, oauth.DefaultLoginLifetime) +
		sweepStorageFolder(ctx, st, oauthStoragePrefix, 24*time.Hour)
	if n != 2 {
		t.Fatalf("swept %d entries, want 2", n)
	}
	for key, want := range map[string]bool{
		oauthLoginsPrefix + "/fresh-login":    true,
		oauthLoginsPrefix + "/old-login":      false,
		oauthStoragePrefix + "/fresh-session": true,
		oauthStoragePrefix + "/old-session":   false,
		"certificates/acme/keep-me":           true,
	} {
		if got := st.Exists(ctx, key); got != want {
			t.Errorf("%s exists %v, want %v", key, got, want)
		}
	}
	if n := sweepStorageFolder(ctx, st, "servicegate/nothing-here", time.Hour); n != 0 {
		t.Fatalf("an empty folder: swept %d", n)
	}
}

// TestServiceOAuthAcceptByWeight: a client that names text/html but prefers
// JSON gets 401, as service_subscription gives it JSON; before, any
// mention of text/html got a redirect.
func TestServiceOAuthAcceptByWeight(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	m := &ServiceOAuth{ClientID: "c", ClientSecret: "s", AuthURL: "https://a.example", Scopes: []string{"p"}, MaxSessions: 19,
		RedirectURI: "https://app.example/oauth/callback"}
	if err := m.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Cleanup()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Fatal("a request without a session went on")
		return nil
	})
	for accept, want := range map[string]int{
		"application/json, text/html;q=0.1": http.StatusUnauthorized,
		"text/html;q=0, */*":                http.StatusUnauthorized,
		"*/*":                               http.StatusUnauthorized,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": http.StatusFound,
		"application/json;q=0.5, text/html":                               http.StatusFound,
	} {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		if err := m.ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		if w.Code != want {
			t.Errorf("Accept %q: status %d, want %d", accept, w.Code, want)
		}
		if want == http.StatusUnauthorized && !strings.HasSuffix(w.Body.String(), "}\n") {
			t.Errorf("Accept %q: body %q is not a JSON refusal ending with a newline", accept, w.Body)
		}
	}
}

// TestServiceOAuthReportLogs: the flow's failures reach the log with what
// failed, and its steps the counters; a refused exchange logs only its
// status and code.
func TestServiceOAuthReportLogs(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	m := &ServiceOAuth{logger: zap.New(core)}
	m.events = newOAuthEvents(prometheus.NewRegistry())
	before := testutil.ToFloat64(oauthEventsTotal.WithLabelValues("login_failed"))
	m.report(oauth.LoginFailed, fmt.Errorf("code exchange: %w", &oauth.RefusedError{Status: 400, Code: "invalid_grant"}))
	m.report(oauth.LoginFailed, errors.New("code exchange: connection refused"))
	m.report(oauth.SessionEnded, oauth.ErrSessionEnded)
	m.report(oauth.SessionUnavailable, errors.New("reading a session: disk gone"))
	m.report(oauth.Logout, errors.New("ending a session: disk gone"))
	m.report(oauth.LoginStarted, nil)
	if got := testutil.ToFloat64(oauthEventsTotal.WithLabelValues("login_failed")) - before; got != 2 {
		t.Fatalf("login_failed counted %v times, want 2", got)
	}
	want := []struct {
		level zapcore.Level
		msg   string
	}{
		{zap.WarnLevel, "code exchange refused"},
		{zap.ErrorLevel, "code exchange failed"},
		{zap.InfoLevel, "session ended: the service refused to refresh its tokens"},
		{zap.ErrorLevel, "session could not be read or refreshed"},
		{zap.ErrorLevel, "session could not be ended"},
	}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("%d log lines, want %d: %v", len(entries), len(want), entries)
	}
	for i, w := range want {
		if entries[i].Level != w.level || entries[i].Message != w.msg {
			t.Errorf("line %d: %v %q, want %v %q", i, entries[i].Level, entries[i].Message, w.level, w.msg)
		}
	}
	if f := entries[0].ContextMap(); f["status"] != int64(400) || f["error"] != "invalid_grant" {
		t.Errorf("refused exchange fields %v", f)
	}
}
