// Package safehttp fetches a payload a caller named by URL (the service's
// stringsUrl or contentUrl of a module job) without letting that URL reach
// what it must not: only from an allow-list of hosts, only at public
// addresses, checked as dialled after name resolution (so a host name
// that resolves to a private address is refused too, redirects included),
// and only up to a size cap, read as it arrives.
//
// It depends on nothing but the standard library and package limits.
package safehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/servicegate/servicegate/limits"
)

// The errors of Get besides the transport's own and limits.ErrTooLarge.
var (
	// ErrHostNotAllowed is a URL (or a redirect) to a host outside the
	// allow-list, or of a scheme other than http and https.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrNotPublic is a host that resolves to an address that is not
	// public (see PublicAddr).
	ErrNotPublic = errors.New("address is not public")
	// ErrIncomplete is a payload whose body broke off.
	ErrIncomplete = errors.New("payload cut off")
)

// StatusError is an answer other than 200 OK.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("the server answered %d", e.Code) }

// Client fetches payloads. Build it with New.
type Client struct {
	hosts   []string
	maxSize int64
	client  *http.Client
}

// Options configure a Client.
type Options struct {
	// Hosts are the hosts payloads may be fetched from: a host name, or
	// *.domain for any host under domain.
	Hosts []string
	// MaxSize is the largest payload fetched, in bytes.
	MaxSize int64
	// Timeout bounds the wait for an answer's header; the caller's
	// context bounds the whole fetch.
	Timeout time.Duration
	// AllowPrivate lets fetches go to loopback, private, link-local and
	// other non-public addresses.
	AllowPrivate bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// New returns a Client for o.
func New(o Options) *Client {
	c := &Client{hosts: make([]string, len(o.Hosts)), maxSize: o.MaxSize}
	for i, h := range o.Hosts {
		c.hosts[i] = strings.ToLower(h)
	}
	dialer := &net.Dialer{
		Timeout:  10 * time.Second,
		Resolver: o.Resolver,
		// The address checked is the one dialled, after resolution.
		Control: func(network, address string, _ syscall.RawConn) error {
			if o.AllowPrivate {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !PublicAddr(ap.Addr()) {
				return ErrNotPublic
			}
			return nil
		},
	}
	c.client = &http.Client{
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: o.Timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if !c.HostAllowed(req.URL) {
				return ErrHostNotAllowed
			}
			return nil
		},
	}
	return c
}

// HostAllowed reports whether u may be fetched: an http or https URL of
// a host of the allow-list.
func (c *Client) HostAllowed(u *url.URL) bool {
	if u.Scheme != "https" && u.Scheme != "http" {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return false
	}
	for _, h := range c.hosts {
		if h == host || strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) {
			return true
		}
	}
	return false
}

// Get fetches the payload at rawURL whole. It fails with ErrHostNotAllowed,
// ErrNotPublic, a *StatusError, limits.ErrTooLarge for a payload over the
// size cap, ErrIncomplete, or the transport's error; a deadline of ctx that passed shows
// in ctx.Err().
func (c *Client) Get(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !c.HostAllowed(u) {
		return nil, ErrHostNotAllowed
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, ErrHostNotAllowed
	}
	res, err := c.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, ErrNotPublic):
			return nil, ErrNotPublic
		case errors.Is(err, ErrHostNotAllowed):
			return nil, ErrHostNotAllowed
		}
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, &StatusError{res.StatusCode}
	}
	if res.ContentLength > c.maxSize {
		return nil, limits.ErrTooLarge
	}
	var buf bytes.Buffer
	if err := limits.ReadBody(&buf, res.Body, c.maxSize); err != nil {
		if errors.Is(err, limits.ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	return buf.Bytes(), nil
}
