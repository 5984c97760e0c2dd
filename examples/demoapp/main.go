// Command demoapp is a small stand-in for an app of the service, the kind
// servicegate fronts: it could as well be written in Node, Python or PHP. It
// knows nothing of tokens, subscriptions, signatures or limits; it trusts the
// headers and bodies servicegate lets through.
//
// That trust holds only when the gateway is the only way in: the app listens
// on loopback (or a Unix socket, -listen unix:/path), and answers only
// requests for the gateway's host (-gateway-hosts), so that a web page that
// rebinds its name to 127.0.0.1 cannot reach it from a browser. The
// descriptor is public and served for any host: service_app reads it at the
// app's own address.
//
//	GET  /manifest.json       the app descriptor: its modules, for the service and service_app
//	GET  /                    the app's page, for people signed in with a browser
//	GET  /api/whoami          the trusted identity headers servicegate set
//	POST /webhooks            an event delivery (already verified), with the organization's app token
//	POST /installed, /uninstall, /subscription-paid  lifecycle events (proved by servicegate, without secrets)
//	POST /file-format         the "key = value" custom file format (examples/formatapp)
//	POST /pre-export          its file-pre-export step
//	POST /file-format/buggy   the same format with a bug: every string is listed twice
//	POST /file-format/slow    a job that takes longer than the module time limit
//	POST /file-format/huge    a job whose answer is larger than the 5 MB limit (strings or content)
package main

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/servicegate/servicegate/examples/formatapp"
)

// defaultGatewayHosts is the host the demo's gateway serves the app at
// (the site of Caddyfile.example); reverse_proxy passes it on as Host.
const defaultGatewayHosts = "localhost:8080"

func main() {
	addr := flag.String("listen", "127.0.0.1:3000", "address to listen on: host:port, or unix:/path for a Unix socket")
	hosts := flag.String("gateway-hosts", envOr("DEMOAPP_GATEWAY_HOSTS", defaultGatewayHosts),
		"comma-separated hosts (host:port as the gateway's site is addressed) whose requests the app answers; env DEMOAPP_GATEWAY_HOSTS")
	flag.Parse()

	network, address := "tcp", *addr
	if path, ok := strings.CutPrefix(*addr, "unix:"); ok {
		network, address = "unix", path
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("demo app listening on %s %s, answering requests for %s", network, address, *hosts)
	srv := &http.Server{Handler: newHandler(strings.Split(*hosts, ",")), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// newHandler is the app: its routes behind the Host check.
func newHandler(gatewayHosts []string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest.json", serveManifest)
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /api/whoami", whoami)
	mux.HandleFunc("POST /webhooks", webhook)
	mux.HandleFunc("POST /installed", lifecycle)
	mux.HandleFunc("POST /uninstall", lifecycle)
	mux.HandleFunc("POST /subscription-paid", lifecycle)
	formats := formatapp.Handler()
	mux.Handle("POST /file-format", formats)
	mux.Handle("POST /pre-export", formats)
	mux.HandleFunc("POST /file-format/buggy", buggyParse)
	mux.HandleFunc("POST /file-format/slow", slowJob)
	mux.HandleFunc("POST /file-format/huge", hugeJob)
	return onlyFor(gatewayHosts, mux)
}

// onlyFor answers only requests whose Host is one of hosts, the gateway's,
// and the descriptor for any. A browser sends the name of the page's site
// as Host, so a page whose name was rebound to 127.0.0.1 is refused here
// instead of being answered as if servicegate had vouched for it.
func onlyFor(hosts []string, next http.Handler) http.Handler {
	allowed := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			allowed[h] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allowed[strings.ToLower(r.Host)] || r.URL.Path == "/manifest.json" {
			next.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if len(host) > 100 {
			host = host[:100] + "…"
		}
		writeJSON(w, http.StatusMisdirectedRequest, map[string]any{"error": map[string]string{"message": fmt.Sprintf(
			"This app answers only through its gateway (%s), not requests for %q.", strings.Join(hosts, ", "), host)}})
	})
}

// manifest is the app descriptor: what the service, and servicegate's
// service_app, know the app by.
//
//go:embed manifest.json
var manifest []byte

func serveManifest(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(manifest)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Demo app</title></head>
<body>
<h1>Demo app</h1>
<p id="who">Signed in as user {{.User}} of {{.Organization}}.</p>
<form method="post" action="/oauth/logout"><button type="submit">Sign out</button></form>
</body>
</html>
`))

// page is the app's one page. servicegate signed the user in and checked
// the organization's subscription before the request arrived here.
func page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pageTemplate.Execute(w, map[string]string{
		"User":         r.Header.Get("X-Service-User-Id"),
		"Organization": r.Header.Get("X-Service-Domain"),
	})
}

// whoami answers with the identity servicegate vouched for.
func whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{
		"message":      "Hello from the demo app",
		"user":         r.Header.Get("X-Service-User-Id"),
		"organization": r.Header.Get("X-Service-Domain"),
	})
}

// webhook acknowledges a delivery and logs its event names.
func webhook(w http.ResponseWriter, r *http.Request) {
	var delivery struct {
		Events []struct {
			Event string `json:"event"`
		} `json:"events"`
	}
	if err := json.NewDecoder(r.Body).Decode(&delivery); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"message": "not a delivery"}})
		return
	}
	names := make([]string, 0, len(delivery.Events))
	for _, e := range delivery.Events {
		names = append(names, e.Event)
	}
	// servicegate gives the organization's app token, for calls to the
	// service's API; the demo only says whether it came.
	token := r.Header.Get("X-Service-App-Token") != ""
	log.Printf("webhook from %s: %s (app token: %v)", r.Header.Get("X-Service-Domain"), strings.Join(names, ", "), token)
	writeJSON(w, http.StatusOK, map[string]any{"received": len(delivery.Events), "app_token": token})
}

// lifecycle logs an installation event; servicegate proved it and keeps
// the installation's secret, so the app only learns who.
func lifecycle(w http.ResponseWriter, r *http.Request) {
	var call struct {
		OrganizationID json.Number `json:"organizationId"`
		Domain         string      `json:"domain"`
	}
	_ = json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&call)
	log.Printf("%s: organization %s (%s)", strings.TrimPrefix(r.URL.Path, "/"), call.OrganizationID, call.Domain)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// buggyParse parses "key = value" files like the format app, with the kind
// of bug servicegate's contract check catches: each string is listed twice,
// so the service would import duplicate keys.
func buggyParse(w http.ResponseWriter, r *http.Request) {
	var job struct {
		File struct {
			Content    string `json:"content"`
			ContentURL string `json:"contentUrl"`
		} `json:"file"`
	}
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"error": map[string]string{"message": "The job could not be read."}})
		return
	}
	content, _ := base64.StdEncoding.DecodeString(job.File.Content)
	if job.File.Content == "" && job.File.ContentURL != "" {
		content, _ = formatapp.Fetch(r.Context(), job.File.ContentURL)
	}
	type record struct {
		Identifier string `json:"identifier"`
		Text       string `json:"text"`
	}
	var records []record
	for _, line := range strings.Split(string(content), "\n") {
		if key, value, ok := strings.Cut(line, "="); ok {
			rec := record{Identifier: strings.TrimSpace(key), Text: strings.TrimSpace(value)}
			records = append(records, rec, rec)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"strings": records}})
}

// slowJob takes three minutes, longer than the service waits, unless the
// caller gives up first.
func slowJob(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(3 * time.Minute):
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"strings": []any{}}})
	case <-r.Context().Done():
		log.Printf("slow job abandoned by the gateway: %v", r.Context().Err())
	}
}

// hugeJob answers with more than 5 MB: 6 MiB of strings for a parse-file
// job, 6 MiB of file content for any other.
func hugeJob(w http.ResponseWriter, r *http.Request) {
	var job struct {
		JobType string `json:"jobType"`
	}
	_ = json.NewDecoder(r.Body).Decode(&job)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	if job.JobType == "parse-file" {
		_, _ = io.WriteString(w, `{"data":{"strings":[`)
		text := strings.Repeat("A", 1000)
		for i := 0; i < 6*1024; i++ { // 6 MiB of strings
			if i > 0 {
				_, _ = io.WriteString(w, ",")
			}
			_, _ = fmt.Fprintf(w, `{"identifier":"key%d","text":"%s"}`, i, text)
		}
		_, _ = io.WriteString(w, `]}}`)
		return
	}
	_, _ = io.WriteString(w, `{"data":{"content":"`)
	chunk := strings.Repeat("A", 64*1024)
	for i := 0; i < 96; i++ { // 6 MiB of base64
		_, _ = io.WriteString(w, chunk)
	}
	_, _ = io.WriteString(w, `"}}`)
}
