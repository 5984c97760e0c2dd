package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSignDeliveryKnownVector(t *testing.T) {
	// RFC 4231 test case 2.
	got := SignDelivery([]byte("what do ya want for nothing?"), "Jefe")
	want := "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestSendDelivery(t *testing.T) {
	body := []byte(`{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`)
	var gotHeaders http.Header
	var gotBody []byte
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeaders = r.Header.Clone()
		gotBody, _ = io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte("app-secret"))
		mac.Write(gotBody)
		sig, err := hex.DecodeString(r.Header.Get("X-Service-Signature"))
		if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
			http.Error(w, `{"error":{"message":"bad signature"}}`, http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "ok")
	}))
	defer app.Close()

	d := Delivery{Body: body, Secret: "app-secret", OrganizationID: "1", Domain: "acme.example", ModuleKey: "events-hook"}
	status, answer, err := SendDelivery(context.Background(), app.Client(), app.URL+"/webhooks", d)
	if err != nil || status != http.StatusAccepted || string(answer) != "ok" {
		t.Fatalf("status %d, answer %q, err %v", status, answer, err)
	}
	if string(gotBody) != string(body) {
		t.Fatalf("body %s", gotBody)
	}
	for k, want := range map[string]string{"User-Agent": "Service-Webhook", "Content-Type": "application/json",
		"X-Service-Id": "1", "X-Service-Domain": "acme.example", "X-Module-Key": "events-hook",
		"X-Service-Signature": SignDelivery(body, "app-secret")} {
		if got := gotHeaders.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}

	d.Signature = SignDelivery([]byte("other"), "app-secret")
	status, _, err = SendDelivery(context.Background(), app.Client(), app.URL, d)
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("with a wrong signature: status %d, err %v", status, err)
	}
}

func TestSendDeliveryUnreachable(t *testing.T) {
	app := httptest.NewServer(http.NotFoundHandler())
	url := app.URL
	app.Close()
	if _, _, err := SendDelivery(context.Background(), nil, url, Delivery{Body: []byte("{}"), Secret: "s"}); err == nil {
		t.Fatal("no error from a closed server")
	}
}
