package contract

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/safehttp"
)

func TestInlineJob(t *testing.T) {
	job := `{"jobType":"build-file","file":{"id":3,"contentUrl":"https://f/x"},"stringsUrl":"https://f/s","project":{"id":2}}`
	out, err := InlineJob([]byte(job), []byte(`[{"identifier":"a"}]`), []byte("YQ=="))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jobType":"build-file","file":{"id":3,"content":"YQ=="},"strings":[{"identifier":"a"}],"project":{"id":2}}`
	if string(out) != want {
		t.Errorf("rewritten job\n%s\nwant (same order)\n%s", out, want)
	}
	for _, tt := range []struct{ job, err string }{
		{`[1]`, "the body is not a JSON object"},
		{`{"file":[],"stringsUrl":"s"}`, "file is not an object"},
		{`{"file":{"contentUrl":"u"}`, "the body is not valid JSON"},
		{`{"file":{"contentUrl":"u"}} {}`, "the body is not valid JSON"},
	} {
		if _, err := InlineJob([]byte(tt.job), nil, []byte("YQ==")); err == nil || err.Error() != tt.err {
			t.Errorf("InlineJob(%s): %v, want %q", tt.job, err, tt.err)
		}
	}
	// Only what was fetched is replaced.
	if out, err := InlineJob([]byte(job), []byte(`[]`), nil); err != nil || !strings.Contains(string(out), `"contentUrl":"https://f/x"`) || strings.Contains(string(out), "stringsUrl") {
		t.Errorf("strings only: %s, %v", out, err)
	}
}

// A job that carries a payload both inline and by URL gets the fetched
// one, once: no key appears twice.
func TestInlineJobNoDuplicateKeys(t *testing.T) {
	job := `{"strings":[{"identifier":"old"}],"file":{"content":"b2xk","contentUrl":"u"},"stringsUrl":"s"}`
	out, err := InlineJob([]byte(job), []byte(`[{"identifier":"new"}]`), []byte("bmV3"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"file":{"content":"bmV3"},"strings":[{"identifier":"new"}]}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}

func FuzzInlineJob(f *testing.F) {
	f.Add([]byte(`{"jobType":"build-file","file":{"contentUrl":"u"},"stringsUrl":"s"}`))
	f.Add([]byte(`{"file":[],"stringsUrl":1}`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, job []byte) {
		out, err := InlineJob(job, []byte(`[]`), []byte("YQ=="))
		if err == nil && !json.Valid(out) {
			t.Fatalf("InlineJob(%q) = %q, not JSON", job, out)
		}
		if err != nil && strings.Contains(err.Error(), string(job)) && len(job) > 8 {
			t.Fatalf("error %q quotes the job", err)
		}
	})
}

func TestStringsArray(t *testing.T) {
	arr, ids, err := StringsArray([]byte("{\"uniqId\":\"a\",\"text\":\"A\"}\n\n{\"uniqId\":\"b\"}\n"), true)
	if err != nil || string(arr) != `[{"uniqId":"a","text":"A"},{"uniqId":"b"}]` || len(ids) != 2 || ids[0] != "a" || ids[1] != "b" {
		t.Errorf("%s %q %v", arr, ids, err)
	}
	if arr, ids, err := StringsArray(nil, false); err != nil || string(arr) != "[]" || ids != nil {
		t.Errorf("empty: %s %q %v", arr, ids, err)
	}
	if _, _, err := StringsArray([]byte("{\"a\":1}\nnot json\n"), false); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

// The payloads come from a server on loopback (allow_private); each
// failure is answered with a status and a message for the service's user.
func TestInliner(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/strings":
			w.Write([]byte("{\"uniqId\":\"u1\",\"identifier\":\"a\"}\n"))
		case "/file":
			w.Write([]byte("a"))
		case "/large":
			w.Write([]byte(strings.Repeat("x", 2000)))
		case "/broken":
			w.Write([]byte("not json\n"))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	in := &Inliner{
		Client:  safehttp.New(safehttp.Options{Hosts: []string{"127.0.0.1"}, MaxSize: 1000, Timeout: time.Second, AllowPrivate: true}),
		MaxSize: 1000,
		Timeout: 300 * time.Millisecond,
	}
	raw := func(strings, file string) []byte {
		return []byte(`{"jobType":"file-pre-export","stringsUrl":"` + srv.URL + strings + `","file":{"contentUrl":"` + srv.URL + file + `"}}`)
	}
	job := &Job{Type: PreExport, StringsURL: srv.URL + "/strings", ContentURL: srv.URL + "/file"}
	out, err := in.Inline(context.Background(), job, raw("/strings", "/file"))
	if want := `{"jobType":"file-pre-export","strings":[{"uniqId":"u1","identifier":"a"}],"file":{"content":"YQ=="}}`; err != nil || string(out) != want {
		t.Fatalf("inlined %s, %v", out, err)
	}
	if job.StringsURL != "" || job.ContentURL != "" || job.count != 1 {
		t.Errorf("job after inlining: %+v", job)
	}
	for _, tt := range []struct {
		strings, file string
		status        int
		message       string
	}{
		{"/missing", "/file", http.StatusBadGateway, "the server answered 404"},
		{"/large", "/file", http.StatusRequestEntityTooLarge, "at most 1000 bytes"},
		{"/broken", "/file", http.StatusBadGateway, "could not be read: line 1"},
		{"/strings", "/slow", http.StatusGatewayTimeout, "within 300ms"},
		{"/strings", "@", http.StatusBadRequest, "host this app does not fetch from"},
	} {
		job := &Job{Type: PreExport, StringsURL: srv.URL + tt.strings, ContentURL: srv.URL + tt.file}
		if tt.file == "@" {
			job.ContentURL = "https://elsewhere.example/file"
		}
		_, err := in.Inline(context.Background(), job, raw(tt.strings, tt.file))
		var ie *InlineError
		if !errors.As(err, &ie) || ie.Status != tt.status || !strings.Contains(ie.Message, tt.message) {
			t.Errorf("%s %s: %v, want %d %q", tt.strings, tt.file, err, tt.status, tt.message)
		}
	}
	// without allow_private, the loopback address is refused as dialled
	in.Client = safehttp.New(safehttp.Options{Hosts: []string{"127.0.0.1"}, MaxSize: 1000, Timeout: time.Second})
	_, err = in.Inline(context.Background(), &Job{StringsURL: srv.URL + "/strings"}, raw("/strings", "/file"))
	var ie *InlineError
	if !errors.As(err, &ie) || ie.Status != http.StatusBadRequest || !strings.Contains(ie.Message, "address this app does not fetch from") {
		t.Errorf("loopback without allow_private: %v", err)
	}
}
