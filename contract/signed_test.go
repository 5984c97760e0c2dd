package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testStore(t *testing.T, now *time.Time) *Store {
	return &Store{Dir: t.TempDir(), Key: []byte("0123456789abcdef0123456789abcdef"), TTL: 10 * time.Minute, Now: func() time.Time { return *now }}
}

func storePayload(t *testing.T, s *Store, kind, body string) (name string, link url.Values) {
	t.Helper()
	f, name, err := s.Create(kind)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, body)
	f.Close()
	q, err := url.ParseQuery(s.Link(name))
	if err != nil {
		t.Fatal(err)
	}
	return name, q
}

func TestStoreTake(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := testStore(t, &now)
	name, q := storePayload(t, s, KindStrings, "payload")
	other, _ := storePayload(t, s, KindContent, "other")

	tampered := url.Values{"expires": {q.Get("expires")}, "sig": {strings.Repeat("0", 64)}}
	later := url.Values{"expires": {"1900000000"}, "sig": {q.Get("sig")}}
	for what, tc := range map[string]struct {
		name string
		q    url.Values
	}{
		"tampered signature":       {name, tampered},
		"expiry moved":             {name, later},
		"another payload's link":   {other, q},
		"no signature":             {name, url.Values{"expires": {q.Get("expires")}}},
		"a path out of the store":  {"../" + name, q},
		"a name Create never made": {strings.ToUpper(name), q},
	} {
		if f, err := s.Take(tc.name, tc.q); !errors.Is(err, ErrLinkInvalid) {
			f.Close()
			t.Errorf("%s: Take = %v, want ErrLinkInvalid", what, err)
		}
	}

	f, err := s.Take(name, q)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "payload" {
		t.Errorf("payload %q", got)
	}
	if _, err := s.Take(name, q); !errors.Is(err, ErrLinkInvalid) {
		t.Errorf("second Take = %v, want ErrLinkInvalid", err)
	}
	if entries, _ := os.ReadDir(s.Dir); len(entries) != 1 {
		t.Errorf("%d files left, want only the other payload", len(entries))
	}
}

func TestStoreExpiryAndSweep(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := testStore(t, &now)
	name, q := storePayload(t, s, KindPreview, "<html>")
	os.WriteFile(filepath.Join(s.Dir, "unrelated.txt"), nil, 0o600)
	now = now.Add(10*time.Minute + time.Second)
	if _, err := s.Take(name, q); !errors.Is(err, ErrLinkInvalid) {
		t.Fatalf("expired Take = %v", err)
	}
	if n := s.Sweep(); n != 0 {
		t.Errorf("Sweep within the grace removed %d", n)
	}
	now = now.Add(sweepGrace)
	kept, _ := storePayload(t, s, KindContent, "fresh") // expires 10m from the later now
	old := now.Add(-time.Hour)
	os.Chtimes(filepath.Join(s.Dir, "unrelated.txt"), old, old)
	if n := s.Sweep(); n != 1 {
		t.Errorf("Sweep removed %d, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "unrelated.txt")); err != nil {
		t.Errorf("Sweep removed a file it did not make: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, kept)); err != nil {
		t.Errorf("Sweep removed a payload that has not expired: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, name)); err == nil {
		t.Errorf("Sweep kept an expired payload")
	}
}

func TestSpillAnswer(t *testing.T) {
	answer := `{"meta":1,"data":{"strings":[{"identifier":"a",
	"text":"A"},{"identifier":"b","text":"B"}],"preview":"PGh0bWw+","other":[1, 2]}}`
	stored := map[string]string{}
	put := func(kind string, write func(io.Writer) error) (string, error) {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return "", err
		}
		stored[kind] = b.String()
		return "https://gw.example/s/" + kind + "?expires=1&sig=ab", nil
	}
	var out bytes.Buffer
	if err := SpillAnswer(strings.NewReader(answer), &out, put); err != nil {
		t.Fatal(err)
	}
	// The links read as served: & is not written as \u0026.
	want := `{"meta":1,"data":{"stringsUrl":"https://gw.example/s/.ndjson?expires=1&sig=ab","previewUrl":"https://gw.example/s/.html?expires=1&sig=ab","other":[1, 2]}}`
	if out.String() != want {
		t.Errorf("answer\n%s\nwant\n%s", out.String(), want)
	}
	if stored[KindStrings] != "{\"identifier\":\"a\",\"text\":\"A\"}\n{\"identifier\":\"b\",\"text\":\"B\"}\n" || stored[KindPreview] != "<html>" {
		t.Errorf("stored %q", stored)
	}
	if !json.Valid(out.Bytes()) {
		t.Errorf("answer is not JSON")
	}
}

func TestReadNDJSON(t *testing.T) {
	var lines []string
	err := ReadNDJSON(strings.NewReader("{\"a\":1}\n\n  {\"b\":2}\r\n{\"c\":3}"), func(l []byte) error {
		lines = append(lines, string(l))
		return nil
	})
	if err != nil || strings.Join(lines, "|") != `{"a":1}|{"b":2}|{"c":3}` {
		t.Errorf("lines %q, %v", lines, err)
	}
	for in, want := range map[string]string{
		"{\"a\":1}\n[1]\n": "line 2 is not a JSON object",
		"{\"a\":\n1}\n":    "line 1 is not a JSON object",
		"{\"a\":\"" + strings.Repeat("x", MaxRecord) + "\"}": "longer than",
	} {
		err := ReadNDJSON(strings.NewReader(in), func([]byte) error { return nil })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadNDJSON(%.20q) = %v, want %q", in, err, want)
		}
	}
}

func FuzzReadNDJSON(f *testing.F) {
	f.Add([]byte("{\"uniqId\":\"h::1\"}\n{\"uniqId\":\"h::2\"}\n"))
	f.Add([]byte("\n\n{}"))
	f.Add([]byte("{\"a\":[1,2,{\"b\":null}]}\r\n]"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_ = ReadNDJSON(bytes.NewReader(in), func(line []byte) error {
			if !json.Valid(line) || line[0] != '{' {
				t.Fatalf("line %q handed over", line)
			}
			return nil
		})
	})
}

func FuzzSpillAnswer(f *testing.F) {
	f.Add([]byte(`{"data":{"strings":[{"identifier":"a","text":"A"}],"content":"YQ==","preview":"PGh0bWw+"}}`))
	f.Add([]byte(`{"error":{"message":"x"}}`))
	f.Add([]byte(`{"data":{"strings":{}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		put := func(kind string, write func(io.Writer) error) (string, error) {
			return "u", write(io.Discard)
		}
		var out bytes.Buffer
		if err := SpillAnswer(bytes.NewReader(in), &out, put); err == nil && !json.Valid(out.Bytes()) {
			t.Fatalf("SpillAnswer(%q) wrote %q, not JSON", in, out.Bytes())
		}
	})
}
