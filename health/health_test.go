package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("redis ping at 127.0.0.1:6379: connection refused") }
	read := func() Descriptor { return Descriptor{State: DescriptorRead, At: now.Add(-90 * time.Second)} }
	cases := []struct {
		name       string
		c          Checker
		status     int
		wantJSON   []string
		wantReason string
	}{
		{
			name:     "nothing to check",
			c:        Checker{},
			status:   200,
			wantJSON: []string{`{"status":"ok","checks":{}}`},
		},
		{
			name: "descriptor read, Redis up, a queue",
			c: Checker{Descriptor: read, Redis: up, RedisAddress: "127.0.0.1:6379", Now: clock, Queues: func() []Queue {
				return []Queue{{Where: "/var/lib/q", Depth: 3, Oldest: now.Add(-2 * time.Second), Writable: up}}
			}},
			status:   200,
			wantJSON: []string{`"descriptor":{"state":"read","age_seconds":90}`, `"redis":{"state":"ok","address":"127.0.0.1:6379"}`, `"queues":[{"where":"/var/lib/q","writable":true,"depth":3,"oldest_age_seconds":2}]`},
		},
		{
			name:     "last good copy serves",
			c:        Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorLastGood, At: now.Add(-time.Hour)} }, Now: clock},
			status:   200,
			wantJSON: []string{`"descriptor":{"state":"last_good","age_seconds":3600}`},
		},
		{
			name:       "descriptor never read",
			c:          Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorNotRead} }, Now: clock},
			status:     503,
			wantJSON:   []string{`"descriptor":{"state":"not_read"}`},
			wantReason: "the app descriptor has not been read yet",
		},
		{
			name:       "Redis down",
			c:          Checker{Descriptor: read, Redis: down, RedisAddress: "127.0.0.1:6379", Now: clock},
			status:     503,
			wantJSON:   []string{`"redis":{"state":"unreachable","address":"127.0.0.1:6379","error":"redis ping at 127.0.0.1:6379: connection refused"}`},
			wantReason: "Redis does not answer",
		},
		{
			name: "queue not writable, and Redis down",
			c: Checker{Redis: down, Queues: func() []Queue {
				return []Queue{{Where: "/q", Writable: func(context.Context) error { return errors.New("read-only file system") }}}
			}},
			status:     503,
			wantJSON:   []string{`{"where":"/q","writable":false,"error":"read-only file system","depth":0,"oldest_age_seconds":0}`},
			wantReason: "Redis does not answer; the webhook queue /q cannot store deliveries",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.c.Check(context.Background())
			if rep.HTTPStatus() != tc.status {
				t.Errorf("status %d, want %d", rep.HTTPStatus(), tc.status)
			}
			if rep.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q", rep.Reason, tc.wantReason)
			}
			body, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantJSON {
				if !strings.Contains(string(body), w) {
					t.Errorf("JSON %s\nlacks %s", body, w)
				}
			}
			if (tc.status == http.StatusOK) != rep.OK() {
				t.Errorf("OK() = %v with status %d", rep.OK(), tc.status)
			}
		})
	}
}

func TestDirWritable(t *testing.T) {
	dir := t.TempDir()
	if err := DirWritable(dir); err != nil {
		t.Fatalf("a temporary directory: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the check left %d files behind", len(left))
	}
	if err := DirWritable(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory reads as writable")
	}
	if os.Getuid() != 0 { // root writes into read-only directories
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := DirWritable(ro); err == nil {
			t.Error("a read-only directory reads as writable")
		}
	}
}
