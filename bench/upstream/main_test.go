package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
