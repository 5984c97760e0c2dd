package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestAppTokenSendsTheServiceAppGrant(t *testing.T) {
	var got map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/token" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		got = nil
		_ = json.NewDecoder(r.Body).Decode(&got)
		if got["app_secret"] != "right" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		w.Write([]byte(`{"access_token":"app.token.x","token_type":"bearer","expires_in":7200,"refresh_token":"r"}`))
	}))
	defer srv.Close()
	c := &Client{AuthURL: srv.URL, ClientID: "client-1", ClientSecret: "client-secret"}
	g := AppGrant{AppID: "demo-app", AppSecret: "right", Domain: "acme", UserID: "7"}
	tok, err := c.AppToken(context.Background(), g, testNow)
	if err != nil || tok.AccessToken != "app.token.x" || !tok.Expiry.Equal(testNow.Add(2*time.Hour)) {
		t.Fatalf("AppToken = %+v, %v", tok, err)
	}
	want := map[string]string{"grant_type": "service_app", "client_id": "client-1", "client_secret": "client-secret",
		"app_id": "demo-app", "app_secret": "right", "domain": "acme", "user_id": "7"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	g.AppSecret = "made-up"
	var refused *RefusedError
	if _, err := c.AppToken(context.Background(), g, testNow); !errors.As(err, &refused) || refused.Code != "invalid_grant" {
		t.Fatalf("a refused grant: %v", err)
	}
}
