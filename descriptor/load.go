package descriptor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Loader reads descriptors from a file or from an address on the app, such
// as http://127.0.0.1:3000/manifest.json. A descriptor fetched from an
// address is kept in Dir, so that a gateway started while the app is down
// still routes the app by its last good descriptor.
type Loader struct {
	// Client fetches descriptors by address. Default: a client with a
	// 10-second timeout.
	Client *http.Client
	// Dir keeps the last good descriptor of each address; empty keeps
	// none.
	Dir string
}

// Loaded is a descriptor and where it came from.
type Loaded struct {
	*Descriptor
	// Data is the document as read.
	Data []byte
	// Stale is set when the address could not be read and the last good
	// copy was used; Err says why the address failed.
	Stale bool
	Err   error
	// KeptAt is when the last good copy in use was kept (Stale only).
	KeptAt time.Time
}

// IsAddress reports whether source names an http or https address rather
// than a file.
func IsAddress(source string) bool {
	return strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://")
}

// Load reads and parses the descriptor named by source. When source is an
// address that cannot be read (or answers a document with defects), the
// last good copy kept in Dir is used and Loaded.Stale is set; without one
// the error is returned.
func (l *Loader) Load(ctx context.Context, source string) (*Loaded, error) {
	if !IsAddress(source) {
		data, err := readFile(source)
		if err != nil {
			return nil, err
		}
		d, err := Parse(source, data)
		if err != nil {
			return nil, err
		}
		return &Loaded{Descriptor: d, Data: data}, nil
	}
	data, err := l.fetch(ctx, source)
	var d *Descriptor
	if err == nil {
		d, err = Parse(source, data)
	}
	if err == nil {
		l.keep(source, data)
		return &Loaded{Descriptor: d, Data: data}, nil
	}
	kept, kerr := os.ReadFile(l.keptPath(source))
	if l.Dir == "" || kerr != nil {
		return nil, err
	}
	d, perr := Parse(source+" (last good copy)", kept)
	if perr != nil {
		return nil, err
	}
	loaded := &Loaded{Descriptor: d, Data: kept, Stale: true, Err: err}
	if fi, serr := os.Stat(l.keptPath(source)); serr == nil {
		loaded.KeptAt = fi.ModTime()
	}
	return loaded, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the app descriptor: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the app descriptor %s: %w", path, err)
	}
	return data, nil
}

func (l *Loader) fetch(ctx context.Context, address string) ([]byte, error) {
	client := l.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return nil, fmt.Errorf("app descriptor address: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	sameOrigin := *client
	sameOrigin.CheckRedirect = checkSameOrigin
	resp, err := sameOrigin.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the app descriptor: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the app descriptor from %s: the app answered %s", req.URL.Redacted(), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the app descriptor from %s: %w", req.URL.Redacted(), err)
	}
	return data, nil
}

// MaxRedirects bounds the redirects followed from a descriptor address.
const MaxRedirects = 3

// checkSameOrigin follows a redirect of the descriptor address only within
// its origin (scheme, host and port), and at most MaxRedirects: what
// another origin answers is not the app's descriptor.
func checkSameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if origin(req.URL) != origin(first) {
		return fmt.Errorf("the app redirected its descriptor address to another origin, %s; servicegate follows redirects only within %s",
			origin(req.URL), origin(first))
	}
	if len(via) > MaxRedirects {
		return fmt.Errorf("the app redirected its descriptor address more than %d times", MaxRedirects)
	}
	return nil
}

// origin is the scheme and host (with any port) of u, without user
// information.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// keptPath is where the last good copy of address is kept.
func (l *Loader) keptPath(address string) string {
	sum := sha256.Sum256([]byte(address))
	return filepath.Join(l.Dir, "descriptor-"+hex.EncodeToString(sum[:8])+".json")
}

// keep writes data as the last good copy of address, atomically; a
// failure only costs the copy.
func (l *Loader) keep(address string, data []byte) {
	if l.Dir == "" {
		return
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(l.Dir, "descriptor-*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), l.keptPath(address)) != nil {
		os.Remove(tmp.Name())
	}
}
