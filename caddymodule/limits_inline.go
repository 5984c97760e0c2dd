package caddymodule

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
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

// inlineError is a payload that could not be inlined; status and message
// are the answer to the service.
type inlineError struct {
	status int
	msg    string
}

func (e *inlineError) Error() string { return e.msg }

var errNotPublic = errors.New("address is not public")

// provisionInline fills in the inline defaults and builds its client.
func (l *ServiceLimits) provisionInline() {
	o := l.Inline
	if o.MaxSize == 0 {
		o.MaxSize = l.MaxRequestSize
	}
	if o.Timeout == 0 {
		o.Timeout = caddy.Duration(defaultInlineTimeout)
	}
	allowPrivate := o.AllowPrivate
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		// The address checked is the one dialled, after resolution: a
		// host name that resolves to a private address is refused too.
		Control: func(network, address string, _ syscall.RawConn) error {
			if allowPrivate {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !publicAddr(ap.Addr()) {
				return errNotPublic
			}
			return nil
		},
	}
	l.inlineClient = &http.Client{
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: time.Duration(o.Timeout),
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if !l.inlineHostAllowed(req.URL) {
				return errHostNotAllowed
			}
			return nil
		},
	}
}

var errHostNotAllowed = errors.New("host not allowed")

// publicAddr reports whether a is a public unicast address.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// nonPublic are ranges IsGlobalUnicast and IsPrivate let through.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64 of any IPv4 address
}

// inlineHostAllowed reports whether u may be fetched.
func (l *ServiceLimits) inlineHostAllowed(u *url.URL) bool {
	if u.Scheme != "https" && u.Scheme != "http" {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, h := range l.Inline.Hosts {
		h = strings.ToLower(h)
		if h == host || strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) {
			return true
		}
	}
	return false
}

// inline fetches the payloads job carries by URL and rewrites the job so
// that it carries them inline; body holds the new job afterwards.
func (l *ServiceLimits) inline(ctx context.Context, job *contract.Job, body *limits.Body) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(l.Inline.Timeout))
	defer cancel()
	var stringsArray, content []byte
	if job.StringsURL != "" {
		ndjson, err := l.fetch(ctx, job.StringsURL, "strings")
		if err != nil {
			return err
		}
		var arr bytes.Buffer
		var ids []string
		arr.Grow(len(ndjson) + 2)
		arr.WriteByte('[')
		n := 0
		var rec struct {
			UniqID string `json:"uniqId"`
		}
		err = contract.ReadNDJSON(bytes.NewReader(ndjson), func(line []byte) error {
			if n > 0 {
				arr.WriteByte(',')
			}
			n++
			arr.Write(line)
			if job.Type == contract.PreExport {
				rec.UniqID = ""
				_ = json.Unmarshal(line, &rec) // a valid object: ReadNDJSON checked it
				ids = append(ids, rec.UniqID)
			}
			return nil
		})
		if err != nil {
			return &inlineError{http.StatusBadGateway, "The strings file the service sent could not be read: " + err.Error() + "."}
		}
		arr.WriteByte(']')
		stringsArray = arr.Bytes()
		if job.Type == contract.PreExport {
			job.SetSentStrings(ids)
		}
	}
	if job.ContentURL != "" {
		raw, err := l.fetch(ctx, job.ContentURL, "file")
		if err != nil {
			return err
		}
		content = make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
		base64.StdEncoding.Encode(content, raw)
	}
	out, err := rewriteJob(body.Bytes(), stringsArray, content)
	if err != nil {
		return &inlineError{http.StatusBadRequest, "The request is not a valid module job: " + err.Error() + "."}
	}
	body.Replace(out)
	job.StringsURL, job.ContentURL = "", ""
	return nil
}

// fetch reads the payload at rawURL, within the size cap.
func (l *ServiceLimits) fetch(ctx context.Context, rawURL, what string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !l.inlineHostAllowed(u) {
		return nil, &inlineError{http.StatusBadRequest, fmt.Sprintf("The %s URL of the job points to a host this app does not fetch from.", what)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &inlineError{http.StatusBadRequest, fmt.Sprintf("The %s URL of the job is not valid.", what)}
	}
	res, err := l.inlineClient.Do(req)
	if err != nil {
		if errors.Is(err, errNotPublic) || errors.Is(err, errHostNotAllowed) {
			return nil, &inlineError{http.StatusBadRequest, fmt.Sprintf("The %s URL of the job points to an address this app does not fetch from.", what)}
		}
		if ctx.Err() != nil {
			return nil, &inlineError{http.StatusGatewayTimeout, fmt.Sprintf("The %s of the job could not be fetched within %s.", what, limits.Duration(time.Duration(l.Inline.Timeout)))}
		}
		return nil, &inlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched from its URL. Try again.", what)}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, &inlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched from its URL: the server answered %d. Try again.", what, res.StatusCode)}
	}
	if res.ContentLength > l.Inline.MaxSize {
		return nil, l.tooLargeToInline(what)
	}
	var buf bytes.Buffer
	if err := limits.ReadBody(&buf, res.Body, l.Inline.MaxSize); err != nil {
		if errors.Is(err, limits.ErrTooLarge) {
			return nil, l.tooLargeToInline(what)
		}
		return nil, &inlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched whole from its URL. Try again.", what)}
	}
	return buf.Bytes(), nil
}

func (l *ServiceLimits) tooLargeToInline(what string) error {
	return &inlineError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"The %s of the job is too large for this app: it accepts at most %s.", what, limits.Limit(l.Inline.MaxSize))}
}

// rewriteJob replaces stringsUrl by strings (when stringsArray is set) and
// file.contentUrl by file.content (when content is set) in a job.
func rewriteJob(job, stringsArray, content []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(job))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	var out bytes.Buffer
	out.Grow(len(job) + len(stringsArray) + len(content))
	out.WriteByte('{')
	first := true
	var raw json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("the body is not valid JSON")
		}
		key, _ := tok.(string)
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("the body is not valid JSON")
		}
		value := []byte(raw)
		switch {
		case key == "stringsUrl" && stringsArray != nil:
			key, value = "strings", stringsArray
		case key == "file" && content != nil:
			var file map[string]json.RawMessage
			if err := json.Unmarshal(raw, &file); err != nil {
				return nil, errors.New("file is not an object")
			}
			delete(file, "contentUrl")
			file["content"], _ = json.Marshal(string(content))
			value, _ = json.Marshal(file)
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(value)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
