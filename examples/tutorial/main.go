// Command tutorial is the app of servicegate's tutorial
// (docs/tutorial/your-own-app.md): a small app of the service with a
// custom file format ("lines": one string per line), a webhook module and
// an API for the organization's members. It holds no secret and checks no
// signature or token: servicegate, in front of it, does. So it must be
// reachable only through the gateway: it listens on the loopback address.
package main

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

//go:embed manifest.json
var manifest []byte

func main() {
	addr := flag.String("listen", "127.0.0.1:3001", "the address to listen on (host:port); keep it on loopback, behind the gateway")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("my app: listening on %s", ln.Addr())
	srv := &http.Server{Handler: newHandler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

// newHandler is the whole app: its descriptor, its API, and the paths its
// modules and lifecycle events declare.
func newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(manifest)
	})
	// Behind service_app, every path the descriptor does not declare needs
	// the service's token; the gateway sets who the user is.
	mux.HandleFunc("GET /api/hello", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{
			"hello": fmt.Sprintf("user %s of %s", r.Header.Get("X-Service-User-Id"), r.Header.Get("X-Service-Domain")),
		})
	})
	// Lifecycle calls: the gateway proved them and keeps the secrets; the
	// app is told, in the gateway's words.
	mux.HandleFunc("POST /installed", lifecycle("installed"))
	mux.HandleFunc("POST /uninstall", lifecycle("uninstalled"))
	mux.HandleFunc("POST /webhooks", webhook)
	mux.HandleFunc("POST /file-format", fileFormat)
	return mux
}

func lifecycle(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var call struct {
			OrganizationID any    `json:"organizationId"`
			Domain         string `json:"domain"`
		}
		json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&call)
		log.Printf("my app: %s for organization %v (%s)", what, call.OrganizationID, call.Domain)
		writeJSON(w, map[string]bool{"ok": true})
	}
}

// webhook receives a delivery whose signature the gateway verified.
func webhook(w http.ResponseWriter, r *http.Request) {
	var delivery struct {
		Events []struct {
			Event string `json:"event"`
		} `json:"events"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 5<<20)).Decode(&delivery); err != nil {
		http.Error(w, "not a delivery", http.StatusBadRequest)
		return
	}
	for _, e := range delivery.Events {
		log.Printf("my app: %s from %s", e.Event, r.Header.Get("X-Service-Domain"))
	}
	writeJSON(w, map[string]int{"received": len(delivery.Events)})
}

// str is a string record of the module contract.
type str struct {
	ID           int                    `json:"id,omitempty"`
	Identifier   string                 `json:"identifier"`
	Text         string                 `json:"text"`
	Translations map[string]translation `json:"translations,omitempty"`
}

type translation struct {
	Text string `json:"text"`
}

// fileFormat answers the custom file format's jobs: parse-file makes one
// string of each line, build-file writes each string's translation (or
// its text) back, a line each.
func fileFormat(w http.ResponseWriter, r *http.Request) {
	var job struct {
		JobType string `json:"jobType"`
		File    struct {
			Content    string `json:"content"`
			ContentURL string `json:"contentUrl"`
		} `json:"file"`
		TargetLanguages []struct {
			ID string `json:"id"`
		} `json:"targetLanguages"`
		Strings    []str  `json:"strings"`
		StringsURL string `json:"stringsUrl"`
	}
	// servicegate held the job to 5 MB and the module contract already.
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
		writeError(w, "The job could not be read.")
		return
	}
	switch job.JobType {
	case "parse-file":
		content, err := base64.StdEncoding.DecodeString(job.File.Content)
		if job.File.ContentURL != "" {
			// The service hands a file over by URL as well as inline.
			content, err = fetch(job.File.ContentURL)
		}
		if err != nil {
			writeError(w, "The file could not be read: "+err.Error())
			return
		}
		strs := []str{}
		for i, line := range strings.Split(strings.TrimRight(string(content), "\n"), "\n") {
			if line != "" {
				strs = append(strs, str{Identifier: fmt.Sprintf("line-%d", i+1), Text: line})
			}
		}
		writeJSON(w, map[string]any{"data": map[string]any{"strings": strs}})
	case "build-file":
		if job.StringsURL != "" {
			// Many strings come by URL, one JSON string record a line.
			raw, err := fetch(job.StringsURL)
			if err == nil {
				err = readLines(raw, &job.Strings)
			}
			if err != nil {
				writeError(w, "The strings could not be read: "+err.Error())
				return
			}
		}
		var b strings.Builder
		for _, s := range job.Strings {
			text := s.Text
			if len(job.TargetLanguages) > 0 {
				if t, ok := s.Translations[job.TargetLanguages[0].ID]; ok {
					text = t.Text
				}
			}
			b.WriteString(text + "\n")
		}
		writeJSON(w, map[string]any{"data": map[string]string{"content": base64.StdEncoding.EncodeToString([]byte(b.String()))}})
	default:
		writeError(w, "This app takes parse-file and build-file jobs.")
	}
}

// fetch reads what the service hands over by URL, at most 5 MB, the
// most a job may carry.
func fetch(url string) ([]byte, error) {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 5<<20+1))
	if err == nil && len(body) > 5<<20 {
		err = fmt.Errorf("%s is over 5 MB", url)
	}
	return body, err
}

// readLines reads new-line delimited JSON string records.
func readLines(raw []byte, strs *[]str) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var s str
		if err := dec.Decode(&s); err != nil {
			return err
		}
		*strs = append(*strs, s)
	}
	return nil
}

// writeError answers a failure the way the service shows it to its user.
func writeError(w http.ResponseWriter, message string) {
	writeJSON(w, map[string]any{"error": map[string]string{"message": message}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
