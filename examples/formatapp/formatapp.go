// Package formatapp is a small custom-file-format app of the service, the
// kind servicegate fronts with service_limits and its contract option. Its
// format is "key = value" lines ("#" starts a comment). It could as well be
// written in any language: it knows nothing of servicegate, takes its jobs
// inline only (strings, file.content) and answers inline only, and leaves
// payloads by URL to servicegate's inline and spill options.
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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
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
		Name    string `json:"name"`
		Content string `json:"content"`
	} `json:"file"`
	TargetLanguages []struct {
		ID string `json:"id"`
	} `json:"targetLanguages"`
	Strings []stringRecord `json:"strings"`
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

type translation struct {
	Text   any    `json:"text"`
	Status string `json:"status,omitempty"`
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
		parseFile(w, &j)
	case "build-file":
		buildFile(w, &j)
	default:
		fail(w, "This app does not do %q jobs.", j.JobType)
	}
}

// parseFile turns each "key = value" line into a string, and writes a
// preview with an element per string.
func parseFile(w http.ResponseWriter, j *job) {
	content, err := base64.StdEncoding.DecodeString(j.File.Content)
	if err != nil {
		fail(w, "The file content is not base64.")
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
