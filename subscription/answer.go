package subscription

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Status is the state of an organization's subscription as the service
// reported it.
type Status uint8

const (
	// Active: the service answered 200 with an expires date.
	Active Status = iota + 1
	// Unpaid: the service answered 402 with a subscribe link.
	Unpaid
	// NotFound: the service answered 400 or 404; the app has no
	// subscription for the organization (app removed, unknown identifier,
	// no subscription defined).
	NotFound
	// Unauthorized: the service answered 401; it did not accept the token.
	Unauthorized
)

// String names the status as metrics and logs show it.
func (s Status) String() string {
	switch s {
	case Active:
		return "active"
	case Unpaid:
		return "unpaid"
	case NotFound:
		return "not_found"
	case Unauthorized:
		return "unauthorized"
	}
	return "unknown"
}

// Answer is the service's answer to one subscription query.
type Answer struct {
	// Status is the subscription's state.
	Status Status
	// Expires is the end of an Active subscription. It may already be in
	// the past: the service answered 200 for a subscription that ended.
	Expires time.Time
	// SubscribeLink is the checkout page of an Unpaid subscription, an
	// absolute http or https URL.
	SubscribeLink string
	// Message is the service's own text for NotFound (the 400 body), for
	// logs; it may be empty.
	Message string
	// TrustedUntil, when set, is the latest time the answer may be kept:
	// an answer that another process received earlier and shared carries
	// the end of its trust there, so that passing it on does not extend it.
	TrustedUntil time.Time
}

// ActiveAt reports whether a is an Active answer whose expires date is
// after t.
func (a Answer) ActiveAt(t time.Time) bool {
	return a.Status == Active && t.Before(a.Expires)
}

// expiresLayout is the service's form of the expires date.
const expiresLayout = "2006-01-02 15:04:05"

// maxBody bounds how much of an answer is read: the real answers are a few
// dozen bytes.
const maxBody = 64 << 10

// ErrGarbage is wrapped by every error about an answer whose status is
// known but whose body cannot be used.
var ErrGarbage = errors.New("unusable answer from the service")

// parseExpires reads an expires date: "YYYY-MM-DD HH:MM:SS" in loc, or RFC
// 3339 with its own offset.
func parseExpires(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.ParseInLocation(expiresLayout, s, loc); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: expires %q is neither YYYY-MM-DD HH:MM:SS nor RFC 3339", ErrGarbage, truncate(s))
}

// parseActive reads a 200 body.
func parseActive(body []byte, loc *time.Location) (Answer, error) {
	var v struct {
		Expires *string `json:"expires"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Answer{}, fmt.Errorf("%w: 200 body is not JSON: %v", ErrGarbage, err)
	}
	if v.Expires == nil {
		return Answer{}, fmt.Errorf("%w: 200 body has no expires", ErrGarbage)
	}
	t, err := parseExpires(*v.Expires, loc)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: Active, Expires: t}, nil
}

// parseUnpaid reads a 402 body. The link is read from subscribe_link or
// subscribeLink and must be an absolute http(s) URL: it is sent to people
// as a link and a Location header.
func parseUnpaid(body []byte) (Answer, error) {
	var v struct {
		Snake string `json:"subscribe_link"`
		Camel string `json:"subscribeLink"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Answer{}, fmt.Errorf("%w: 402 body is not JSON: %v", ErrGarbage, err)
	}
	link := v.Snake
	if link == "" {
		link = v.Camel
	}
	if link == "" {
		return Answer{}, fmt.Errorf("%w: 402 body has no subscribe_link", ErrGarbage)
	}
	if !httpLink(link) {
		return Answer{}, fmt.Errorf("%w: subscribe_link %q is not an http(s) URL", ErrGarbage, truncate(link))
	}
	return Answer{Status: Unpaid, SubscribeLink: link}, nil
}

// parseNotFound reads a 400 or 404 body; the body is optional and only its
// message is kept.
func parseNotFound(body []byte) Answer {
	var v struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &v) // a 404 has no body; the status says it all
	return Answer{Status: NotFound, Message: truncate(v.Message)}
}

// httpLink reports whether s is an absolute http or https URL with a host,
// no user info and no control characters.
func httpLink(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// truncate shortens text from the service before it reaches an error or a
// log line.
func truncate(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
