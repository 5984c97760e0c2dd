package health

import (
	"context"
	"encoding/json"
	"errors"
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
	readOnly := func(context.Context) error {
		return errors.New("cannot create a file in /var/lib/q: read-only file system")
	}
	read := func() Descriptor { return Descriptor{State: DescriptorRead, At: now.Add(-90 * time.Second)} }
	diskQueue := func(writable func(context.Context) error) func() []Queue {
		return func() []Queue {
			return []Queue{{Where: "/var/lib/q", Depth: 3, Oldest: now.Add(-2 * time.Second), Writable: writable}}
		}
	}
	redisQueue := func() []Queue {
		return []Queue{{Where: "redis 127.0.0.1:6379 servicegate:{queue:http://app}", Shared: true, Writable: down}}
	}
	cases := []struct {
		name       string
		c          Checker
		status     int
		public     string   // the public answer, whole
		wantJSON   []string // in the full report
		wantReason string
	}{
		{
			name:   "nothing to check",
			c:      Checker{},
			status: 200,
			public: `{"status":"ok","checks":[]}`,
		},
		{
			name: "descriptor read, Redis up, a queue, installations",
			c: Checker{Descriptor: read, Redis: up, RedisAddress: "127.0.0.1:6379", Now: clock, Queues: diskQueue(up),
				Installations: up, InstallationsWhere: "/var/lib/i.db"},
			status: 200,
			public: `{"status":"ok","checks":[{"name":"descriptor","state":"read"},{"name":"redis","state":"ok"},{"name":"webhook_queue","state":"ok"},{"name":"installations","state":"ok"}]}`,
			wantJSON: []string{`{"name":"descriptor","state":"read","status":"ok","age_seconds":90}`,
				`{"name":"redis","state":"ok","status":"ok","address":"127.0.0.1:6379"}`,
				`{"name":"webhook_queue","state":"ok","status":"ok","where":"/var/lib/q","depth":3,"oldest_age_seconds":2}`,
				`{"name":"installations","state":"ok","status":"ok","where":"/var/lib/i.db"}`},
		},
		{
			name:       "last good copy serves: degraded",
			c:          Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorLastGood, At: now.Add(-time.Hour)} }, Now: clock},
			status:     200,
			public:     `{"status":"degraded","checks":[{"name":"descriptor","state":"last_good"}]}`,
			wantJSON:   []string{`{"name":"descriptor","state":"last_good","status":"degraded","age_seconds":3600}`},
			wantReason: "the app did not answer its descriptor: its last good copy serves",
		},
		{
			name:       "descriptor never read",
			c:          Checker{Descriptor: func() Descriptor { return Descriptor{State: DescriptorNotRead} }, Now: clock},
			status:     503,
			public:     `{"status":"unavailable","checks":[{"name":"descriptor","state":"not_read"}]}`,
			wantJSON:   []string{`{"name":"descriptor","state":"not_read","status":"unavailable"}`},
			wantReason: "the app descriptor has not been read yet",
		},
		{
			name:       "Redis down, a disk queue: degraded",
			c:          Checker{Descriptor: read, Redis: down, RedisAddress: "127.0.0.1:6379", Now: clock, Queues: diskQueue(up)},
			status:     200,
			public:     `{"status":"degraded","checks":[{"name":"descriptor","state":"read"},{"name":"redis","state":"unreachable"},{"name":"webhook_queue","state":"ok"}]}`,
			wantJSON:   []string{`{"name":"redis","state":"unreachable","status":"degraded","address":"127.0.0.1:6379","error":"redis ping at 127.0.0.1:6379: connection refused"}`},
			wantReason: "Redis does not answer",
		},
		{
			name:       "Redis down, installations in Redis: degraded",
			c:          Checker{Redis: down, Installations: down},
			status:     200,
			public:     `{"status":"degraded","checks":[{"name":"redis","state":"unreachable"},{"name":"installations","state":"unreachable"}]}`,
			wantReason: "Redis does not answer; the installation store cannot be read: installed organizations are answered from this instance's copy",
		},
		{
			name:       "Redis down, the queue only in Redis: unavailable",
			c:          Checker{Redis: down, Queues: redisQueue},
			status:     503,
			public:     `{"status":"unavailable","checks":[{"name":"redis","state":"unreachable"},{"name":"webhook_queue","state":"unreachable"}]}`,
			wantJSON:   []string{`{"name":"webhook_queue","state":"unreachable","status":"unavailable","where":"redis 127.0.0.1:6379 servicegate:{queue:http://app}","error":"redis ping`},
			wantReason: "Redis does not answer; the webhook queue redis 127.0.0.1:6379 servicegate:{queue:http://app} cannot store deliveries",
		},
		{
			name: "a disk queue not writable, another in Redis fine: the worse shows",
			c: Checker{Now: clock, Queues: func() []Queue {
				return append([]Queue{{Where: "redis x", Shared: true, Writable: up}}, diskQueue(readOnly)()...)
			}},
			status:     503,
			public:     `{"status":"unavailable","checks":[{"name":"webhook_queue","state":"not_writable"}]}`,
			wantJSON:   []string{`"error":"cannot create a file in /var/lib/q: read-only file system"`},
			wantReason: "the webhook queue /var/lib/q cannot store deliveries",
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
			public, _ := json.Marshal(rep.Public())
			if string(public) != tc.public {
				t.Errorf("public %s\nwant   %s", public, tc.public)
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

// TestCheckPingsRedisOnce: a queue kept in Redis takes the state of the
// check's own Redis ping rather than pinging again.
func TestCheckPingsRedisOnce(t *testing.T) {
	pings := 0
	ping := func(context.Context) error { pings++; return errors.New("down") }
	c := Checker{Redis: ping, Queues: func() []Queue {
		return []Queue{{Where: "a", Shared: true, Writable: ping}, {Where: "b", Shared: true, Writable: ping}}
	}}
	rep := c.Check(context.Background())
	if pings != 1 || rep.HTTPStatus() != 503 || rep.Checks[1].State != StateUnreachable || rep.Checks[2].Error != "down" {
		t.Errorf("%d pings, report %+v", pings, rep)
	}
}
