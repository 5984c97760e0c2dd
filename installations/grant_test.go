package installations

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/oauth"
)

func TestServiceGrant(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write([]byte(`{"access_token":"app.token.x","token_type":"bearer","expires_in":60,"refresh_token":"r"}`))
		}
	}))
	defer srv.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grant := ServiceGrant(&oauth.Client{AuthURL: srv.URL, ClientID: "c", ClientSecret: "s"}, func() time.Time { return now })
	in := testInstallation("42", "acme", "s3cret")
	tok, err := grant(context.Background(), in)
	if err != nil || tok.AccessToken != "app.token.x" || !tok.IssuedAt.Equal(now) || !tok.Expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("grant = %+v, %v", tok, err)
	}
	status = http.StatusBadRequest
	if _, err := grant(context.Background(), in); !errors.Is(err, ErrRefused) {
		t.Fatalf("a refusal: %v", err)
	}
	status = http.StatusBadGateway
	if _, err := grant(context.Background(), in); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("an outage: %v", err)
	}
	srv.Close()
	_, err = grant(context.Background(), in)
	if err == nil || errors.Is(err, ErrRefused) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("unreachable: %v", err)
	}
}
