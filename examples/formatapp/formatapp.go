// Package formatapp is a small custom-file-format app of the service, the
// kind servicegate fronts with service_limits and its contract option. Its
// format is "key = value" lines ("#" starts a comment). It could as well be
// written in any language: it knows nothing of servicegate. It takes the
// payloads of a job inline (strings, file.content) or by URL (stringsUrl,
// file.contentUrl, fetched as the service hands them over), and answers
// inline, leaving answers over 5 MB to servicegate's spill option.
//
//	POST /file-format   parse-file: one string per line, with an HTML
//	                    preview; build-file: the file with each string's
//	                    translation into the first target language
//	POST /pre-export    file-pre-export: texts and translations trimmed of
//	                    surrounding spaces, every string kept
package formatapp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"time"
)

// Handler returns the app's handler.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /file-format", fileFormat)
	mux.HandleFunc("POST /pre-export", preExport)
	return mux
}

// job is the part of a request the app reads.
type job struct {
	JobType string `json:"jobType"`
	File    struct {
		Name       string `json:"name"`
		Content    string `json:"content"`
		ContentURL string `json:"contentUrl"`
	} `json:"file"`
	TargetLanguages []struct {
		ID string `json:"id"`
	} `json:"targetLanguages"`
	Strings    []stringRecord `json:"strings"`
	StringsURL string         `json:"stringsUrl"`
}

// maxPayload caps a payload fetched by URL: what the service sends.
const maxPayload = 5 << 20

// fetchClient fetches the payloads jobs carry by URL.
var fetchClient = &http.Client{Timeout: 30 * time.Second}

// Fetch downloads a payload the service handed over by URL (a job's
// file.contentUrl or stringsUrl), at most 5 MB of it.
func Fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := fetchClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPayload+1))
	if err == nil && len(b) > maxPayload {
		err = errors.New("it is over 5 MB")
	}
	return b, err
}

// content is the job's file: file.content, or fetched from
// file.contentUrl.
func (j *job) content(ctx context.Context) ([]byte, error) {
	if j.File.Content == "" && j.File.ContentURL != "" {
		return Fetch(ctx, j.File.ContentURL)
	}
	return base64.StdEncoding.DecodeString(j.File.Content)
}

// readStrings fetches the job's strings when they came by stringsUrl, as
// new-line delimited JSON.
func (j *job) readStrings(ctx context.Context) error {
	if j.StringsURL == "" {
		return nil
	}
	b, err := Fetch(ctx, j.StringsURL)
	if err != nil {
		return err
	}
	j.Strings = j.Strings[:0]
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s stringRecord
		if err := json.Unmarshal(line, &s); err != nil {
			return errors.New("a line is not a string record")
		}
		j.Strings = append(j.Strings, s)
	}
	return nil
}

// stringRecord is a string record as this app uses it.
type stringRecord struct {
	UniqID       string                 `json:"uniqId,omitempty"`
	PreviewID    int                    `json:"previewId,omitempty"`
	Identifier   string                 `json:"identifier"`
	Context      string                 `json:"context,omitempty"`
	HasPlurals   bool                   `json:"hasPlurals,omitempty"`
	Labels       []string               `json:"labels,omitempty"`
	Text         any                    `json:"text"`
	Translations map[string]translation `json:"translations,omitempty"`
}

// translation is one translation of a string: its text and status are
// strings, or objects keyed by plural category for a plural string.
type translation struct {
	Text   any `json:"text"`
	Status any `json:"status,omitempty"`
}

func answer(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// fail answers with the error the service shows its user.
func fail(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": fmt.Sprintf(format, args...)}})
}

func fileFormat(w http.ResponseWriter, r *http.Request) {
	var j job
	if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
		fail(w, "The job could not be read.")
		return
	}
	switch j.JobType {
	case "parse-file":
		parseFile(r.Context(), w, &j)
	case "build-file":
		if err := j.readStrings(r.Context()); err != nil {
			fail(w, "The strings of the job could not be fetched: %v.", err)
			return
		}
		buildFile(w, &j)
	default:
		fail(w, "This app does not do %q jobs.", j.JobType)
	}
}

// parseFile turns each "key = value" line into a string, and writes a
// preview with an element per string.
func parseFile(ctx context.Context, w http.ResponseWriter, j *job) {
	content, err := j.content(ctx)
	if err != nil {
		fail(w, "The file could not be read: %v.", err)
		return
	}
	var strs []stringRecord
	var preview strings.Builder
	preview.WriteString("<html><body>\n")
	seen := make(map[string]bool)
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			fail(w, "Line %d of %s is not a key = value line.", n, j.File.Name)
			return
		}
		if seen[key] {
			fail(w, "Line %d of %s repeats the key %q.", n, j.File.Name, key)
			return
		}
		seen[key] = true
		id := len(strs) + 1
		strs = append(strs, stringRecord{PreviewID: id, Identifier: key, Text: value})
		fmt.Fprintf(&preview, "<p>%s = <span id=\"string_preview_id_%d\">%s</span></p>\n", html.EscapeString(key), id, html.EscapeString(value))
	}
	preview.WriteString("</body></html>\n")
	if strs == nil {
		strs = []stringRecord{}
	}
	answer(w, map[string]any{
		"strings": strs,
		"preview": base64.StdEncoding.EncodeToString([]byte(preview.String())),
	})
}

// buildFile writes each string as "key = translation", the source text
// where there is no translation.
func buildFile(w http.ResponseWriter, j *job) {
	lang := ""
	if len(j.TargetLanguages) > 0 {
		lang = j.TargetLanguages[0].ID
	}
	var out bytes.Buffer
	for _, s := range j.Strings {
		text := s.Text
		if t, ok := s.Translations[lang]; ok {
			text = t.Text
		}
		str, ok := text.(string)
		if !ok {
			fail(w, "The string %q has plural forms, which this format cannot hold.", s.Identifier)
			return
		}
		fmt.Fprintf(&out, "%s = %s\n", s.Identifier, strings.ReplaceAll(str, "\n", " "))
	}
	answer(w, map[string]any{"content": base64.StdEncoding.EncodeToString(out.Bytes())})
}

// preExport trims texts and translations, keeping every string and its
// uniqId.
func preExport(w http.ResponseWriter, r *http.Request) {
	var j job
	if err := json.NewDecoder(r.Body).Decode(&j); err != nil || j.JobType != "file-pre-export" {
		fail(w, "The job could not be read.")
		return
	}
	if err := j.readStrings(r.Context()); err != nil {
		fail(w, "The strings of the job could not be fetched: %v.", err)
		return
	}
	for i := range j.Strings {
		s := &j.Strings[i]
		if t, ok := s.Text.(string); ok {
			s.Text = strings.TrimSpace(t)
		}
		for lang, tr := range s.Translations {
			if t, ok := tr.Text.(string); ok {
				tr.Text = strings.TrimSpace(t)
				s.Translations[lang] = tr
			}
		}
	}
	if j.Strings == nil {
		j.Strings = []stringRecord{}
	}
	answer(w, map[string]any{"strings": j.Strings})
}
