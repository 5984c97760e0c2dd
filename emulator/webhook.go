package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/servicegate/servicegate/signature"
)

// maxAnswer caps how much of an app's answer to a delivery is read.
const maxAnswer = 1 << 20

// SignDelivery returns the X-Service-Signature of a delivery body: the
// HMAC-SHA256 of the exact body bytes under the app secret, in lowercase hex.
func SignDelivery(body []byte, secret string) string {
	return signature.Sign(secret, body)
}

// Delivery is one bulk event delivery to an app's webhook module.
type Delivery struct {
	// Body is the JSON body, {"events":[…]}, sent as is.
	Body []byte
	// Secret is the app secret that signs Body.
	Secret string
	// Signature, when set, is sent instead of the signature of Body, to
	// try an app's handling of a bad signature.
	Signature string
	// OrganizationID is sent as X-Service-Id.
	OrganizationID string
	// Domain is sent as X-Service-Domain.
	Domain string
	// ModuleKey is sent as X-Module-Key.
	ModuleKey string
}

// SendDelivery POSTs d to url the way the service delivers webhook events
// and returns the app's answer: its status and up to 1 MiB of its body.
func SendDelivery(ctx context.Context, client *http.Client, url string, d Delivery) (int, []byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return 0, nil, fmt.Errorf("webhook delivery: %w", err)
	}
	sig := d.Signature
	if sig == "" {
		sig = SignDelivery(d.Body, d.Secret)
	}
	req.Header.Set("User-Agent", "Service-Webhook")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Id", d.OrganizationID)
	req.Header.Set("X-Service-Domain", d.Domain)
	req.Header.Set("X-Service-Signature", sig)
	req.Header.Set("X-Module-Key", d.ModuleKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("webhook delivery to %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, answer, fmt.Errorf("webhook delivery to %s: reading the answer: %w", req.URL.Redacted(), err)
	}
	return resp.StatusCode, answer, nil
}
