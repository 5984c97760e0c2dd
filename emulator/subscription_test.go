package emulator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func mint(t testing.TB, secret string, change func(*Token)) string {
	t.Helper()
	tok := Token{Issuer: DefaultIssuer, Audience: testClientID, UserID: 7, OrganizationID: 1,
		Domain: "acme.example", IssuedAt: testStart, Lifetime: time.Hour}
	if change != nil {
		change(&tok)
	}
	raw, err := MintToken(secret, tok)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func subscriptionRequest(app, authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/v2/applications/"+app+"/subscription", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

func TestSubscriptionAnswers(t *testing.T) {
	tests := []struct {
		name          string
		app           string
		authorization func(t testing.TB) string
		status        int
		body          string
	}{
		{"active", "demo-app", func(t testing.TB) string { return "Bearer " + mint(t, testSecret, nil) },
			200, `{"expires":"2030-01-01 00:00:00"}`},
		{"lowercase scheme", "demo-app", func(t testing.TB) string { return "bearer " + mint(t, testSecret, nil) },
			200, `{"expires":"2030-01-01 00:00:00"}`},
		{"unpaid", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain, tok.OrganizationID = "unpaid.example", 2 })
		}, 402, `{"subscribe_link":"https://service.example/checkout/2"}`},
		{"missing subscription", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain, tok.OrganizationID = "missing.example", 3 })
		}, 404, `{"message":"Subscription not found"}`},
		{"unknown organization", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain = "other.example" })
		}, 404, `{"message":"Organization not found"}`},
		{"organization by id", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain, tok.OrganizationID = "", 2 })
		}, 402, `{"subscribe_link":"https://service.example/checkout/2"}`},
		{"no organization", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain, tok.OrganizationID = "", 0 })
		}, 404, `{"message":"Organization not found"}`},
		{"unknown app", "other-app", func(t testing.TB) string { return "Bearer " + mint(t, testSecret, nil) },
			400, `{"message":"Application not found"}`},
		{"no token", "demo-app", func(testing.TB) string { return "" },
			401, `{"message":"An access token is required: Authorization: Bearer \u003ctoken\u003e."}`},
		{"basic scheme", "demo-app", func(testing.TB) string { return "Basic dTpw" },
			401, `{"message":"An access token is required: Authorization: Bearer \u003ctoken\u003e."}`},
		{"wrong secret", "demo-app", func(t testing.TB) string { return "Bearer " + mint(t, "other", nil) },
			401, `{"message":"The access token is invalid or has expired."}`},
		{"expired", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.IssuedAt = testStart.Add(-2 * time.Hour) })
		}, 401, `{"message":"The access token is invalid or has expired."}`},
		{"issued in the future", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.IssuedAt = testStart.Add(time.Hour) })
		}, 401, `{"message":"The access token is invalid or has expired."}`},
		{"other audience", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Audience = "other-client" })
		}, 401, `{"message":"The access token is invalid or has expired."}`},
		{"other issuer", "demo-app", func(t testing.TB) string {
			return "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Issuer = "elsewhere" })
		}, 401, `{"message":"The access token is invalid or has expired."}`},
		{"garbage token", "demo-app", func(testing.TB) string { return "Bearer not.a.jwt" },
			401, `{"message":"The access token is invalid or has expired."}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t)
			rec := do(s, subscriptionRequest(tt.app, tt.authorization(t)))
			if rec.Code != tt.status || strings.TrimSpace(rec.Body.String()) != tt.body {
				t.Fatalf("got %d %s, want %d %s", rec.Code, rec.Body, tt.status, tt.body)
			}
			if rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func TestSubscriptionTokenFromTheFlow(t *testing.T) {
	s, _ := newTestServer(t)
	status, out := exchange(t, s, codeGrantRequest(approve(t, s, nil)))
	if status != http.StatusOK {
		t.Fatal(out)
	}
	rec := do(s, subscriptionRequest("demo-app", "Bearer "+out["access_token"].(string)))
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestSubscriptionQueriesCounted(t *testing.T) {
	s, _ := newTestServer(t)
	acme := "Bearer " + mint(t, testSecret, nil)
	byID := "Bearer " + mint(t, testSecret, func(tok *Token) { tok.Domain, tok.OrganizationID = "", 2 })
	for range 3 {
		do(s, subscriptionRequest("demo-app", acme))
	}
	do(s, subscriptionRequest("demo-app", byID))
	do(s, subscriptionRequest("demo-app", "Bearer bad"))
	if got := s.Queries("acme.example"); got != 3 {
		t.Errorf("acme.example: %d queries, want 3", got)
	}
	if got := s.Queries("2"); got != 1 {
		t.Errorf("organization 2: %d queries, want 1", got)
	}
	if got := s.Queries("unpaid.example"); got != 0 {
		t.Errorf("unpaid.example: %d queries, want 0", got)
	}
}

func TestSubscriptionOutage(t *testing.T) {
	s, _ := newTestServer(t)
	auth := "Bearer " + mint(t, testSecret, nil)
	s.SetOutage(true)
	rec := do(s, subscriptionRequest("demo-app", auth))
	var out map[string]string
	if rec.Code != http.StatusServiceUnavailable || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out["message"] == "" {
		t.Fatalf("during outage: %d %s", rec.Code, rec.Body)
	}
	s.SetOutage(false)
	if rec := do(s, subscriptionRequest("demo-app", auth)); rec.Code != http.StatusOK {
		t.Fatalf("after outage: %d %s", rec.Code, rec.Body)
	}
}

func TestSubscriptionDelayEndsWithTheRequest(t *testing.T) {
	s, _ := newTestServer(t)
	s.SetDelay(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	r := subscriptionRequest("demo-app", "Bearer "+mint(t, testSecret, nil)).WithContext(ctx)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(s, r) }()
	cancel()
	rec := <-done
	if rec.Body.Len() != 0 {
		t.Fatalf("a cancelled query was answered: %s", rec.Body)
	}
	s.SetDelay(time.Millisecond)
	if rec := do(s, subscriptionRequest("demo-app", "Bearer "+mint(t, testSecret, nil))); rec.Code != http.StatusOK {
		t.Fatalf("after a short delay: %d", rec.Code)
	}
}

func TestSubscriptionRefusesPost(t *testing.T) {
	s, _ := newTestServer(t)
	r := httptest.NewRequest(http.MethodPost, "/api/v2/applications/demo-app/subscription", nil)
	if rec := do(s, r); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("status %d", rec.Code)
	}
}

func BenchmarkSubscriptionQuery(b *testing.B) {
	s, _ := newTestServer(b)
	auth := "Bearer " + mint(b, testSecret, nil)
	r := subscriptionRequest("demo-app", auth)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

func BenchmarkMintToken(b *testing.B) {
	tok := Token{Issuer: DefaultIssuer, Audience: testClientID, UserID: 7, OrganizationID: 1,
		Domain: "acme.example", IssuedAt: testStart, Lifetime: time.Hour}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MintToken(testSecret, tok); err != nil {
			b.Fatal(err)
		}
	}
}
