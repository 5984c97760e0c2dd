package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/safehttp"
)

// The defaults of inline.
const defaultInlineTimeout = 30 * time.Second

// InlineOptions fetches the payloads a job carries by URL (stringsUrl,
// file.contentUrl) and hands them to the app inline (strings,
// file.content), so that an app needs one code path only.
type InlineOptions struct {
	// The hosts payloads may be fetched from: a host name, or *.domain
	// for any host under domain. Required.
	Hosts []string `json:"hosts,omitempty"`

	// The largest payload fetched, in bytes. Default: max_request_size.
	MaxSize int64 `json:"max_size,omitempty"`

	// How long fetching the payloads of one job may take. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Allow fetching from loopback, private, link-local and other
	// non-public addresses. Off by default: the address is checked as
	// dialled, after name resolution.
	AllowPrivate bool `json:"allow_private,omitempty"`
}

// provisionInline fills in the inline defaults and builds its fetcher.
func (l *ServiceLimits) provisionInline() *contract.Inliner {
	o := l.Inline
	if o.MaxSize == 0 {
		o.MaxSize = l.MaxRequestSize
	}
	if o.Timeout == 0 {
		o.Timeout = caddy.Duration(defaultInlineTimeout)
	}
	return contract.NewInliner(safehttp.Options{
		Hosts:        o.Hosts,
		MaxSize:      o.MaxSize,
		Timeout:      time.Duration(o.Timeout),
		AllowPrivate: o.AllowPrivate,
	})
}
