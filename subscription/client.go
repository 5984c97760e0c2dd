package subscription

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/servicegate/servicegate/spans"
)

// Client makes subscription queries:
//
//	GET {base_url}/api/v2/applications/{app_identifier}/subscription
//	Authorization: Bearer <token>
//	Content-Type: application/json
type Client struct {
	// HTTP sends the queries. Nil means a client that follows no
	// redirects (a redirect is an unusable answer, and the token must not
	// travel to wherever it points).
	HTTP *http.Client
	// Location is the time zone of expires dates written without an
	// offset. Nil means UTC.
	Location *time.Location
}

// NewClient returns a Client over a transport of its own (see
// CloseIdleConnections) that follows no redirects, reading expires dates
// written without an offset in timeZone, an IANA time zone name ("" is
// UTC). The error is time.LoadLocation's.
func NewClient(timeZone string) (*Client, error) {
	loc, err := time.LoadLocation(timeZone)
	if err != nil {
		return nil, err
	}
	return &Client{
		HTTP: &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: noRedirects.CheckRedirect,
		},
		Location: loc,
	}, nil
}

// CloseIdleConnections closes the idle connections of c's HTTP client.
func (c *Client) CloseIdleConnections() {
	if c.HTTP != nil {
		c.HTTP.CloseIdleConnections()
	}
}

// noRedirects is the default HTTP client.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Query asks the service at baseURL whether the organization of token has
// paid for the app appIdentifier. The deadline of ctx bounds the query. An
// error means no usable answer: the service could not be reached, answered
// 5xx or another unexpected status, or sent a body that cannot be read. The
// token never appears in an error.
func (c *Client) Query(ctx context.Context, baseURL, appIdentifier, token string) (a Answer, err error) {
	ctx, span := spans.Start(ctx, "servicegate.subscription.query")
	defer func() {
		if err != nil {
			span.Fail(err.Error()) // never holds the token
		} else {
			span.String("servicegate.subscription.answer", a.Status.String())
		}
		span.End()
	}()
	target, err := QueryURL(baseURL, appIdentifier)
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Answer{}, fmt.Errorf("subscription query to %s: %w", target, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	spans.Inject(ctx, req.Header)

	hc := c.HTTP
	if hc == nil {
		hc = noRedirects
	}
	resp, err := hc.Do(req)
	if err != nil {
		// url.Error carries the method and URL, never the headers.
		return Answer{}, fmt.Errorf("subscription query: %w", err)
	}
	span.Int("http.response.status_code", int64(resp.StatusCode))
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
	}()

	switch resp.StatusCode {
	case http.StatusOK, http.StatusPaymentRequired, http.StatusBadRequest, http.StatusNotFound:
	case http.StatusUnauthorized:
		return Answer{Status: Unauthorized}, nil
	default:
		return Answer{}, &StatusError{Target: target, Status: resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Answer{}, fmt.Errorf("subscription query to %s: reading the %d answer: %w", target, resp.StatusCode, err)
	}
	if len(body) > maxBody {
		return Answer{}, fmt.Errorf("subscription query to %s: %w: the %d answer is over %d bytes", target, ErrGarbage, resp.StatusCode, maxBody)
	}

	switch resp.StatusCode {
	case http.StatusOK:
		loc := c.Location
		if loc == nil {
			loc = time.UTC
		}
		a, err = parseActive(body, loc)
	case http.StatusPaymentRequired:
		a, err = parseUnpaid(body)
	default:
		a = parseNotFound(body)
	}
	if err != nil {
		return Answer{}, fmt.Errorf("subscription query to %s: %w", target, err)
	}
	return a, nil
}

// StatusError is a subscription query the service answered with a status
// the interface gives no meaning (5xx, 3xx, …): it was reached, and did
// not say.
type StatusError struct {
	// Target is the query's URL; it holds no token.
	Target string
	// Status is the HTTP status of the answer.
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("subscription query to %s: unexpected status %d", e.Target, e.Status)
}

// AnsweredStatus is the status the service answered with.
func (e *StatusError) AnsweredStatus() int { return e.Status }

// ErrBaseURL is wrapped by every error about a base URL that cannot be
// queried.
var ErrBaseURL = errors.New("invalid service base URL")

// ValidateBaseURL checks that baseURL is where a token may be sent: an
// absolute http or https URL with a host, and without user info, query or
// fragment.
func ValidateBaseURL(baseURL string) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		// url.Error repeats the whole URL, user info included: keep only
		// the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w: %v", ErrBaseURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q is not http or https", ErrBaseURL, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: it holds user info", ErrBaseURL)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%w: it has no host", ErrBaseURL)
	case strings.HasPrefix(u.Hostname(), ".") || strings.Contains(u.Hostname(), ".."):
		return fmt.Errorf("%w: host %q has an empty label", ErrBaseURL, u.Hostname())
	case strings.ContainsAny(baseURL, "?#"):
		return fmt.Errorf("%w: it holds a query or a fragment", ErrBaseURL)
	case u.Opaque != "":
		return fmt.Errorf("%w: it is not a hierarchical URL", ErrBaseURL)
	}
	return nil
}

// QueryURL returns the subscription query address for an app at baseURL,
// after validating baseURL.
func QueryURL(baseURL, appIdentifier string) (string, error) {
	if err := ValidateBaseURL(baseURL); err != nil {
		return "", err
	}
	if appIdentifier == "" {
		return "", errors.New("subscription query: empty app identifier")
	}
	return strings.TrimRight(baseURL, "/") + "/api/v2/applications/" + url.PathEscape(appIdentifier) + "/subscription", nil
}
