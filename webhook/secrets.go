package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/servicegate/servicegate/signature"
)

// SecretsFile is a JSON file of per-organization secrets,
// {"<organization domain or id>": "secret" | ["secret", …], …}, and its
// last good contents. Organizations listed with the same secrets share one
// verifier, which is how the check of organization headers tells that a
// domain and an id name the same organization.
//
// Lookups are safe for concurrent use with Watch and Refresh; Watch and
// Refresh must not run at the same time.
type SecretsFile struct {
	path    string
	logger  *zap.Logger
	current atomic.Pointer[map[string]*signature.Verifier]

	// Only the watching goroutine touches these after the first load.
	modTime time.Time
	size    int64
	missing bool
}

// OpenSecretsFile reads and parses the file at path. Later failures to
// reload it go to logger, without the file's contents.
func OpenSecretsFile(path string, logger *zap.Logger) (*SecretsFile, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	f := &SecretsFile{path: path, logger: logger}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// Lookup returns the verifier of org, nil when the file does not list it.
func (f *SecretsFile) Lookup(org string) *signature.Verifier {
	if org == "" {
		return nil
	}
	return (*f.current.Load())[org]
}

// Len is the number of organizations listed.
func (f *SecretsFile) Len() int { return len(*f.current.Load()) }

// load reads and parses the file, keeping its contents only when they
// parse.
func (f *SecretsFile) load() error {
	info, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("secrets_file: %w", err)
	}
	f.modTime, f.size = info.ModTime(), info.Size()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("secrets_file: %w", err)
	}
	orgs, err := ParseSecretsFile(data)
	if err != nil {
		return fmt.Errorf("secrets_file %s: %w", f.path, err)
	}
	f.current.Store(&orgs)
	return nil
}

// Watch calls Refresh every poll interval until ctx ends.
func (f *SecretsFile) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.Refresh()
		}
	}
}

// Refresh reloads the file when its modification time or size changed.
// A file that is missing or does not parse is logged once, and the last
// good contents stay in use.
func (f *SecretsFile) Refresh() {
	info, err := os.Stat(f.path)
	if err != nil {
		if !f.missing {
			f.logger.Error("webhook secrets file unreadable; keeping the last good secrets", zap.Error(err))
			f.missing = true
		}
		return
	}
	f.missing = false
	if info.ModTime().Equal(f.modTime) && info.Size() == f.size {
		return
	}
	// load records the new time and size even when the contents do not
	// parse, so a broken file is logged once, not on every tick.
	if err := f.load(); err != nil {
		f.logger.Error("webhook secrets file not reloaded; keeping the last good secrets", zap.Error(err))
		return
	}
	f.logger.Info("webhook secrets file reloaded", zap.String("path", f.path), zap.Int("organizations", f.Len()))
}

const wantObject = `want a JSON object {"<organization>": "secret" or ["secret", …]}`

// ParseSecretsFile parses {"<organization>": "secret" | ["s1", "s2"], …}.
// Organizations with the same set of secrets share one verifier. Its
// errors name organizations and positions, never a secret: the JSON
// decoder's own messages can quote the input, so they are not passed on.
func ParseSecretsFile(data []byte) (map[string]*signature.Verifier, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			if strings.Contains(syn.Error(), "exceeded max depth") {
				return nil, fmt.Errorf("too deeply nested (at byte %d)", syn.Offset)
			}
			return nil, fmt.Errorf("not valid JSON (at byte %d)", syn.Offset)
		}
		return nil, errors.New(wantObject)
	}
	if raw == nil {
		return nil, errors.New(wantObject)
	}
	orgs := make(map[string]*signature.Verifier, len(raw))
	sets := make(map[string]*signature.Verifier, len(raw))
	for org, value := range raw {
		if org == "" {
			return nil, errors.New("an organization name is empty")
		}
		var secrets []string
		var one string
		if err := json.Unmarshal(value, &one); err == nil {
			secrets = []string{one}
		} else if err := json.Unmarshal(value, &secrets); err != nil || len(secrets) == 0 {
			return nil, fmt.Errorf("organization %q: want a secret or a non-empty list of secrets", org)
		}
		set := secretSet(secrets)
		if v, ok := sets[set]; ok {
			orgs[org] = v
			continue
		}
		v, err := signature.NewVerifier(secrets...)
		if err != nil {
			return nil, fmt.Errorf("organization %q: %w", org, err)
		}
		sets[set], orgs[org] = v, v
	}
	return orgs, nil
}

// secretSet names a set of secrets, whatever their order and repeats.
func secretSet(secrets []string) string {
	sorted := slices.Compact(slices.Sorted(slices.Values(secrets)))
	var b strings.Builder
	for _, s := range sorted {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}
