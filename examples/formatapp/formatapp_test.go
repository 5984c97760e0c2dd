package formatapp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/contract"
)

func request(t *testing.T, path string, job map[string]any) (*contract.Job, []byte) {
	t.Helper()
	base := map[string]any{
		"organization": map[string]any{"id": 1}, "project": map[string]any{"id": 2},
		"file":           map[string]any{"name": "a.kv"},
		"sourceLanguage": map[string]any{"id": "en"}, "targetLanguages": []any{map[string]any{"id": "de"}},
	}
	for k, v := range job {
		base[k] = v
	}
	body, _ := json.Marshal(base)
	module := contract.CustomFileFormat
	if path == "/pre-export" {
		module = contract.FilePreExport
	}
	j, err := contract.ParseJob(module, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the test job breaks the contract: %v", err)
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
	return j, rec.Body.Bytes()
}

// TestAnswersKeepTheContract runs each job type and checks the answers
// with the contract package, as servicegate's contract option does.
func TestAnswersKeepTheContract(t *testing.T) {
	src := "# greeting\nhello = Hello, <world>\nbye=Bye\n"
	j, ans := request(t, "/file-format", map[string]any{"jobType": "parse-file",
		"file": map[string]any{"name": "a.kv", "content": base64.StdEncoding.EncodeToString([]byte(src))}})
	if a, err := j.CheckAnswer(bytes.NewReader(ans)); err != nil || a.Strings != 2 {
		t.Errorf("parse-file: %d strings, %v: %s", a.Strings, err, ans)
	}

	j, ans = request(t, "/file-format", map[string]any{"jobType": "build-file", "strings": []any{
		map[string]any{"identifier": "hello", "text": "Hello", "translations": map[string]any{"de": map[string]any{"text": "Hallo"}}},
	}})
	var built struct{ Data struct{ Content string } }
	json.Unmarshal(ans, &built)
	content, _ := base64.StdEncoding.DecodeString(built.Data.Content)
	if _, err := j.CheckAnswer(bytes.NewReader(ans)); err != nil || string(content) != "hello = Hallo\n" {
		t.Errorf("build-file: %q, %v", content, err)
	}

	j, ans = request(t, "/pre-export", map[string]any{"jobType": "file-pre-export", "strings": []any{
		map[string]any{"uniqId": "h::1", "identifier": "hello", "text": " Hello ", "hasPlurals": false},
		map[string]any{"uniqId": "h::2", "identifier": "n", "hasPlurals": true, "text": map[string]any{"one": "1", "other": "n"}},
	}})
	if a, err := j.CheckAnswer(bytes.NewReader(ans)); err != nil || a.Strings != 2 || !strings.Contains(string(ans), `"text":"Hello"`) {
		t.Errorf("pre-export: %v: %s", err, ans)
	}
}

func TestParseFileRefusesABrokenLine(t *testing.T) {
	_, ans := request(t, "/file-format", map[string]any{"jobType": "parse-file",
		"file": map[string]any{"name": "a.kv", "content": base64.StdEncoding.EncodeToString([]byte("a = 1\nno equals sign\n"))}})
	if !strings.Contains(string(ans), `"message":"Line 2 of a.kv is not a key = value line."`) {
		t.Errorf("answer %s", ans)
	}
}
