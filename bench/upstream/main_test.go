package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/contract"
)

func TestHandle(t *testing.T) {
	job := bytes.Repeat([]byte("x"), 100<<10)
	tests := []struct {
		name, method, path string
		body               []byte
		want               []byte
	}{
		{"job echoed", http.MethodPost, "/file-format/parse", job, job},
		{"pre-export echoed", http.MethodPost, "/pre-export/run", []byte(`{"strings":[]}`), []byte(`{"strings":[]}`)},
		{"webhook answered small", http.MethodPost, "/webhooks", job, small},
		{"GET answered small", http.MethodGet, "/file-format/parse", nil, small},
		{"API answered small", http.MethodGet, "/api/projects", nil, small},
		{"parse-file job answered 5 MB", http.MethodPost, answer5MPath, job, answer5M},
		{"GET of the answer path answered small", http.MethodGet, answer5MPath, nil, small},
	}
	srv := httptest.NewServer(http.HandlerFunc(handle))
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, tt.want) {
				t.Errorf("%d with %d bytes, want 200 with %d", resp.StatusCode, len(got), len(tt.want))
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func TestParseFileAnswer(t *testing.T) {
	if len(answer5M) > answer5MSize || len(answer5M) < answer5MSize-300 {
		t.Errorf("answer5M has %d bytes, want just under %d", len(answer5M), answer5MSize)
	}
	var a struct {
		Data struct {
			Strings []struct {
				Identifier   string `json:"identifier"`
				Text         string `json:"text"`
				Translations map[string]struct {
					Text, Status string
				} `json:"translations"`
			} `json:"strings"`
		} `json:"data"`
	}
	if err := json.Unmarshal(answer5M, &a); err != nil {
		t.Fatalf("answer5M is not JSON: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range a.Data.Strings {
		if s.Identifier == "" || s.Text == "" || seen[s.Identifier] || s.Translations["uk"].Text == "" {
			t.Fatalf("string record %+v: no identifier or text, a duplicate identifier, or no uk translation", s)
		}
		seen[s.Identifier] = true
	}
	// The contract check service_limits runs accepts it as the answer to a
	// parse-file job into uk, as the bench sends.
	job := `{"jobType":"parse-file","organization":{"id":1,"domain":"acme.example"},"project":{"id":1,"identifier":"demo","name":"Demo"},` +
		`"file":{"id":1,"name":"strings.json","content":"e30="},"sourceLanguage":{"id":"en","name":"English","pluralCategoryNames":["one","other"]},` +
		`"targetLanguages":[{"id":"uk","name":"Ukrainian","pluralCategoryNames":["one","few","many","other"]}]}`
	j, err := contract.ParseJob(contract.CustomFileFormat, strings.NewReader(job))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.CheckAnswer(bytes.NewReader(answer5M)); err != nil {
		t.Errorf("the contract check refuses answer5M: %v", err)
	}
	if len(seen) < 10_000 {
		t.Errorf("%d string records, want tens of thousands", len(seen))
	}
}

// TestContractPayloads checks the contract's payloads: each just under
// 5 MB, the answers passing the contract of their jobs, the pre-export
// answer keeping every string of the strings file.
func TestContractPayloads(t *testing.T) {
	for key, body := range contractPayloads {
		if len(body) > answer5MSize || len(body) < answer5MSize-1000 {
			t.Errorf("%s: %d bytes, want just under %d", key, len(body), answer5MSize)
		}
	}
	langs := `"sourceLanguage":{"id":"en","pluralCategoryNames":["one","other"]},"targetLanguages":[{"id":"uk","pluralCategoryNames":["one","few","many","other"]}]`
	build, err := contract.ParseJob(contract.CustomFileFormat, strings.NewReader(`{"jobType":"build-file","organization":{},"project":{},`+langs+`,"strings":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build.CheckAnswerBytes(contractPayloads["POST "+build5MPath]); err != nil {
		t.Errorf("build-file answer: %v", err)
	}
	arr, ids, err := contract.StringsArray(contractPayloads["GET "+strings5MPath], true)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := contract.ParseJob(contract.FilePreExport, strings.NewReader(`{"jobType":"file-pre-export","organization":{},"project":{},`+langs+`,"strings":`+string(arr)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if ans, err := pre.CheckAnswerBytes(contractPayloads["POST "+preExport5MPath]); err != nil || ans.Strings != len(ids) {
		t.Errorf("pre-export answer: %d strings of %d, %v", ans.Strings, len(ids), err)
	}
}
