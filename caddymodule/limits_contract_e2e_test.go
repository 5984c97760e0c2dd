package caddymodule

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/examples/formatapp"
)

// formatJob is a job of the service for the format app.
func formatJob(jobType string, fields map[string]any) []byte {
	m := map[string]any{
		"jobType":         jobType,
		"organization":    map[string]any{"id": 1, "domain": "acme"},
		"project":         map[string]any{"id": 2, "name": "Site"},
		"file":            map[string]any{"id": 3, "name": "site.kv"},
		"sourceLanguage":  map[string]any{"id": "en", "pluralCategoryNames": []string{"one", "other"}},
		"targetLanguages": []any{map[string]any{"id": "uk", "pluralCategoryNames": []string{"one", "few", "many", "other"}}},
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func b64(s []byte) string { return base64.StdEncoding.EncodeToString(s) }

// moduleAnswer is an answer of a module app.
type moduleAnswer struct {
	Data struct {
		Strings    []json.RawMessage `json:"strings"`
		StringsURL string            `json:"stringsUrl"`
		Content    string            `json:"content"`
		ContentURL string            `json:"contentUrl"`
		Preview    string            `json:"preview"`
		PreviewURL string            `json:"previewUrl"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, body []byte) moduleAnswer {
	t.Helper()
	var a moduleAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer %.200q is not JSON: %v", body, err)
	}
	return a
}

// download gets a URL and returns its status and body.
func download(t *testing.T, u string) (int, []byte) {
	t.Helper()
	res, err := limitsClient().Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// startFormatCaddy fronts the format app with the contract options, and a
// second app (other) for answers the format app never gives.
func startFormatCaddy(t *testing.T, format, other, extra string) {
	t.Helper()
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	@format path /file-format /servicegate/spill/*
	route @format {
		service_limits {
			contract custom-file-format
			spill
			spill_dir %[3]s
			spill_base_url http://localhost:{port}
		}
		reverse_proxy %[1]s
	}
	@pre path /pre-export
	route @pre {
		service_limits {
			contract file-pre-export
		}
		reverse_proxy %[1]s
	}
	@other path /other/* /other-spill/*
	route @other {
		service_limits {
			contract custom-file-format
			spill
			spill_path /other-spill/
			spill_dir %[3]s
		}
		reverse_proxy %[2]s
	}
	@expiring path /expiring/* /expiring-spill/*
	route @expiring {
		service_limits {
			contract custom-file-format
			spill
			spill_path /expiring-spill/
			spill_dir %[3]s
			spill_ttl 1s
		}
		reverse_proxy %[2]s
	}
	%[4]s
}
`, strings.TrimPrefix(format, "http://"), strings.TrimPrefix(other, "http://"), t.TempDir(), extra))
}

// otherApp answers /<anything>/<name> with the body set for name.
func otherApp(t *testing.T, answers map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answers[path.Base(r.URL.Path)])
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestContractE2EFormatApp(t *testing.T) {
	app := httptest.NewServer(formatapp.Handler())
	t.Cleanup(app.Close)
	other := otherApp(t, map[string][]byte{
		"duplicate": []byte(`{"data":{"strings":[{"identifier":"title","text":"A"},{"identifier":"title","text":"B"}]}}`),
		"status":    []byte(`{"data":{"strings":[{"identifier":"title","text":"A","translations":{"uk":{"text":"Б","status":"done"}}}]}}`),
		"apperror":  []byte(`{"error":{"message":"Line 3 is not a key = value line."}}`),
	})
	startFormatCaddy(t, app.URL, other.URL, "")

	source := []byte("# site\ntitle = Hello\nsubtitle =  World \n")
	t.Run("parse-file", func(t *testing.T) {
		status, _, body := send(t, "/file-format", formatJob("parse-file", map[string]any{"file": map[string]any{"name": "site.kv", "content": b64(source)}}), true)
		a := decodeAnswer(t, body)
		if status != 200 || len(a.Data.Strings) != 2 || a.Data.Preview == "" {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("build-file", func(t *testing.T) {
		job := formatJob("build-file", map[string]any{"strings": []any{
			map[string]any{"id": 1, "identifier": "title", "text": "Hello", "translations": map[string]any{"uk": map[string]any{"text": "Привіт"}}},
			map[string]any{"id": 2, "identifier": "subtitle", "text": "World"},
		}})
		status, _, body := send(t, "/file-format", job, true)
		a := decodeAnswer(t, body)
		content, _ := base64.StdEncoding.DecodeString(a.Data.Content)
		if status != 200 || string(content) != "title = Привіт\nsubtitle = World\n" {
			t.Fatalf("%d %s (%q)", status, body, content)
		}
	})
	t.Run("pre-export", func(t *testing.T) {
		job := formatJob("file-pre-export", map[string]any{"strings": []any{
			map[string]any{"uniqId": "h::1", "identifier": "title", "text": " Hello "},
		}})
		status, _, body := send(t, "/pre-export", job, true)
		if a := decodeAnswer(t, body); status != 200 || len(a.Data.Strings) != 1 || !bytes.Contains(a.Data.Strings[0], []byte(`"text":"Hello"`)) {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("a malformed job never reaches the app", func(t *testing.T) {
		status, _, body := send(t, "/pre-export", formatJob("parse-file", nil), true)
		if status != 400 || !strings.Contains(errorMessage(t, body), "takes file-pre-export") {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("the app's own error passes", func(t *testing.T) {
		status, _, body := send(t, "/other/apperror", formatJob("parse-file", map[string]any{"file": map[string]any{"content": ""}}), true)
		if status != 200 || errorMessage(t, body) != "Line 3 is not a key = value line." {
			t.Fatalf("%d %s", status, body)
		}
	})
	for name, want := range map[string]string{
		"duplicate": `string "title" (number 2) has the identifier of an earlier string`,
		"status":    `string "title" (number 1) has a translation into "uk" with a status other than`,
	} {
		t.Run("breach: "+name, func(t *testing.T) {
			status, _, body := send(t, "/other/"+name, formatJob("parse-file", map[string]any{"file": map[string]any{"content": ""}}), true)
			if status != 502 || !strings.Contains(errorMessage(t, body), want) {
				t.Fatalf("%d %s; want 502 with %q", status, body, want)
			}
		})
	}
}

func TestContractE2ESpill(t *testing.T) {
	app := httptest.NewServer(formatapp.Handler())
	t.Cleanup(app.Close)
	built := pattern(9 << 20) // a 9 MB file: a 12 MB answer in base64
	bigAnswer := []byte(`{"data":{"content":"` + b64(built) + `"}}`)
	other := otherApp(t, map[string][]byte{"big": bigAnswer})
	startFormatCaddy(t, app.URL, other.URL, "")

	job := formatJob("build-file", map[string]any{"strings": []any{}})
	status, _, body := send(t, "/other/big", job, true)
	a := decodeAnswer(t, body)
	if status != 200 || a.Data.ContentURL == "" || a.Data.Content != "" || len(body) > 1024 {
		t.Fatalf("answer of %d bytes to a 12 MB answer: %d %.300s", len(bigAnswer), status, body)
	}
	u, err := url.Parse(a.Data.ContentURL)
	if err != nil || u.Query().Get("sig") == "" || u.Query().Get("expires") == "" {
		t.Fatalf("contentUrl %q is not signed", a.Data.ContentURL)
	}
	link := e2eURL(u.RequestURI()) // the route has no spill_base_url: the URL is of the site's host
	if !strings.HasPrefix(a.Data.ContentURL, e2eBase()+"/other-spill/") {
		t.Errorf("contentUrl %q is not under the site's host and spill path", a.Data.ContentURL)
	}

	tampered := strings.Replace(link, "sig=", "sig=0", 1)
	if status, body := download(t, tampered); status != 403 {
		t.Fatalf("tampered link: %d %.200s", status, body)
	}
	status, got := download(t, link)
	if status != 200 || !bytes.Equal(got, built) {
		t.Fatalf("download: %d, %d bytes, same as built: %v", status, len(got), bytes.Equal(got, built))
	}
	if status, _ := download(t, link); status != 403 {
		t.Errorf("second download: %d, want 403", status)
	}

	t.Run("expired", func(t *testing.T) {
		status, _, body := send(t, "/expiring/other/big", job, true)
		a := decodeAnswer(t, body)
		if status != 200 || a.Data.ContentURL == "" {
			t.Fatalf("%d %.300s", status, body)
		}
		time.Sleep(2100 * time.Millisecond) // spill_ttl 1s
		if status, _ := download(t, a.Data.ContentURL); status != 403 {
			t.Errorf("expired link: %d, want 403", status)
		}
	})

	t.Run("parse-file strings by URL", func(t *testing.T) {
		var src bytes.Buffer
		for i := 0; src.Len() < 3<<19; i++ {
			fmt.Fprintf(&src, "k%d = v%d\n", i, i)
		}
		job := formatJob("parse-file", map[string]any{"file": map[string]any{"name": "big.kv", "content": b64(src.Bytes())}})
		// the app's own answer, straight from it, to compare with
		direct := httptest.NewRecorder()
		formatapp.Handler().ServeHTTP(direct, httptest.NewRequest("POST", "/file-format", bytes.NewReader(job)))
		want := decodeAnswer(t, direct.Body.Bytes())
		if direct.Body.Len() <= 5<<20 {
			t.Fatalf("the app's answer is %d bytes, meant to be over 5 MiB", direct.Body.Len())
		}

		status, _, body := send(t, "/file-format", job, false)
		a := decodeAnswer(t, body)
		if status != 200 || a.Data.StringsURL == "" || a.Data.PreviewURL == "" || a.Data.Strings != nil {
			t.Fatalf("%d %.300s", status, body)
		}
		status, ndjson := download(t, a.Data.StringsURL)
		lines := bytes.Split(bytes.TrimSuffix(ndjson, []byte("\n")), []byte("\n"))
		if status != 200 || len(lines) != len(want.Data.Strings) {
			t.Fatalf("strings download: %d, %d lines for %d strings", status, len(lines), len(want.Data.Strings))
		}
		for i, line := range lines {
			if !bytes.Equal(line, want.Data.Strings[i]) {
				t.Fatalf("line %d is %s, want %s", i+1, line, want.Data.Strings[i])
			}
		}
		status, preview := download(t, a.Data.PreviewURL)
		wantPreview, _ := base64.StdEncoding.DecodeString(want.Data.Preview)
		if status != 200 || !bytes.Equal(preview, wantPreview) {
			t.Fatalf("preview download: %d, %d bytes, want %d", status, len(preview), len(wantPreview))
		}
	})
}

func TestContractE2EInline(t *testing.T) {
	app := httptest.NewServer(formatapp.Handler())
	t.Cleanup(app.Close)
	var fetched atomic.Int64
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		switch r.URL.Path {
		case "/strings.ndjson":
			io.WriteString(w, `{"id":1,"identifier":"title","text":"Hello","translations":{"uk":{"text":"Привіт"}}}`+"\n\n"+`{"id":2,"identifier":"subtitle","text":"World"}`+"\n")
		case "/site.kv":
			io.WriteString(w, "title = Hello\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(files.Close)
	filesHost := strings.TrimPrefix(files.URL, "http://")
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	handle_path /trusting/* {
		service_limits {
			contract custom-file-format
			inline
			inline_hosts 127.0.0.1
			inline_allow_private
		}
		reverse_proxy %[1]s
	}
	handle_path /public/* {
		service_limits {
			contract custom-file-format
			inline
			inline_hosts 127.0.0.1 localhost
		}
		reverse_proxy %[1]s
	}
}
`, strings.TrimPrefix(app.URL, "http://")))

	t.Run("build-file with stringsUrl", func(t *testing.T) {
		job := formatJob("build-file", map[string]any{"stringsUrl": files.URL + "/strings.ndjson"})
		status, _, body := send(t, "/trusting/file-format", job, true)
		a := decodeAnswer(t, body)
		content, _ := base64.StdEncoding.DecodeString(a.Data.Content)
		if status != 200 || string(content) != "title = Привіт\nsubtitle = World\n" {
			t.Fatalf("%d %s (%q)", status, body, content)
		}
	})
	t.Run("parse-file with file.contentUrl", func(t *testing.T) {
		job := formatJob("parse-file", map[string]any{"file": map[string]any{"name": "site.kv", "contentUrl": files.URL + "/site.kv"}})
		status, _, body := send(t, "/trusting/file-format", job, true)
		if a := decodeAnswer(t, body); status != 200 || len(a.Data.Strings) != 1 {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("loopback refused at dial time", func(t *testing.T) {
		before := fetched.Load()
		for _, u := range []string{files.URL + "/site.kv", "http://localhost:" + strings.Split(filesHost, ":")[1] + "/site.kv"} {
			job := formatJob("parse-file", map[string]any{"file": map[string]any{"contentUrl": u}})
			status, _, body := send(t, "/public/file-format", job, true)
			if status != 400 || !strings.Contains(errorMessage(t, body), "address this app does not fetch from") {
				t.Errorf("%s: %d %s", u, status, body)
			}
		}
		if fetched.Load() != before {
			t.Errorf("the loopback server was reached")
		}
	})
	t.Run("host not allowed", func(t *testing.T) {
		job := formatJob("parse-file", map[string]any{"file": map[string]any{"contentUrl": "http://files.example.net/site.kv"}})
		status, _, body := send(t, "/trusting/file-format", job, true)
		if status != 400 || !strings.Contains(errorMessage(t, body), "host this app does not fetch from") {
			t.Errorf("%d %s", status, body)
		}
	})
}
