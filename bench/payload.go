package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// The secret shared by service_auth, the emulator and service_webhook in
// the benchmarks. It protects nothing: every server here is on loopback
// and lives for one run.
const benchSecret = "servicegate-bench-secret-0123456789abcdef"

// The organization of the benchmarks, as the emulator knows it, and the
// app's client id (the emulator's, and the audience of service_app's
// tokens).
const (
	benchDomain   = "acme.example"
	benchOrgID    = 1
	benchClientID = "demo-client"
)

// request is what both sides of a chain are sent: the same method, path,
// headers and body.
type request struct {
	method  string
	path    string
	headers [][2]string
	body    []byte
}

func (rq request) build(base string) (*http.Request, error) {
	req, err := http.NewRequest(rq.method, base+rq.path, bytes.NewReader(rq.body))
	if err != nil {
		return nil, err
	}
	if rq.body == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	for _, h := range rq.headers {
		req.Header.Set(h[0], h[1])
	}
	return req, nil
}

// deliveryBody is a bulk webhook delivery {"events":[…]} of at most size
// bytes, as close to size as whole events allow.
func deliveryBody(size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"events":[`)
	const tail = `]}`
	for i := 0; ; i++ {
		ev := fmt.Sprintf(`{"event":"project.translated","project":{"id":"%d"},"targetLanguage":{"id":"de"}}`, 1000+i)
		sep := 0
		if i > 0 {
			sep = 1
		}
		if b.Len()+sep+len(ev)+len(tail) > size {
			if i == 0 {
				b.WriteString(ev) // never an empty delivery
			}
			break
		}
		if sep == 1 {
			b.WriteByte(',')
		}
		b.WriteString(ev)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// jobBody is a custom-file-format parse-file job of exactly size bytes
// (when size leaves room for the envelope): the file content, base64 in a
// JSON string, fills it.
func jobBody(size int) []byte {
	const head = `{"jobType":"parse-file","organization":{"id":1,"domain":"acme.example"},"project":{"id":1,"identifier":"demo","name":"Demo"},"file":{"id":1,"name":"strings.json","content":"`
	const tail = `"}}`
	n := size - len(head) - len(tail)
	if n < 4 {
		n = 4
	}
	n -= n % 4 // whole base64 quanta
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(head)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[(i*7+i/64)%64])
	}
	b.WriteString(tail)
	for b.Len() < size { // JSON allows trailing white space
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// contractJobBody is a custom-file-format parse-file job of exactly size
// bytes (when size leaves room for the envelope) that passes the module
// contract: jobBody's job with a source language and one target language,
// "uk", the language of the upstream's parse-file answer.
func contractJobBody(size int) []byte {
	const langs = `{"sourceLanguage":{"id":"en","name":"English","pluralCategoryNames":["one","other"]},` +
		`"targetLanguages":[{"id":"uk","name":"Ukrainian","pluralCategoryNames":["one","few","many","other"]}],`
	b := jobBody(size - len(langs) + 1)
	return append([]byte(langs), b[1:]...) // jobBody starts with '{'
}

// webhookRequest is a signed delivery of body to /webhooks.
func webhookRequest(body []byte) request {
	mac := hmac.New(sha256.New, []byte(benchSecret))
	mac.Write(body)
	return request{
		method: http.MethodPost,
		path:   "/webhooks",
		headers: [][2]string{
			{"Content-Type", "application/json"},
			{"User-Agent", "Service-Webhook"},
			{"X-Service-Signature", hex.EncodeToString(mac.Sum(nil))},
			{"X-Service-Domain", benchDomain},
			{"X-Service-Id", fmt.Sprint(benchOrgID)},
		},
		body: body,
	}
}

// jobRequest is a module job to a custom-file-format endpoint.
func jobRequest(body []byte) request {
	return request{
		method:  http.MethodPost,
		path:    "/file-format/parse",
		headers: [][2]string{{"Content-Type", "application/json"}},
		body:    body,
	}
}

// answerPath is where the upstream answers any job with a valid parse-file
// answer of about 5 MB (bench/upstream: answer5MPath).
const answerPath = "/file-format/answer5m"

// answerJobRequest is a job to answerPath.
func answerJobRequest(body []byte) request {
	return request{
		method:  http.MethodPost,
		path:    answerPath,
		headers: [][2]string{{"Content-Type", "application/json"}},
		body:    body,
	}
}

// The upstream's paths for the contract's other 5 MB payloads
// (bench/upstream: build5MPath, preExport5MPath, strings5MPath).
const (
	build5MPath     = "/file-format/build5m"
	preExport5MPath = "/pre-export/answer5m"
	strings5MPath   = "/pre-export/strings5m.ndjson"
)

// contractLanguages are the languages of the contract's jobs: those of the
// upstream's answers.
const contractLanguages = `"sourceLanguage":{"id":"en","name":"English","pluralCategoryNames":["one","other"]},` +
	`"targetLanguages":[{"id":"uk","name":"Ukrainian","pluralCategoryNames":["one","few","many","other"]}]`

// buildJobRequest is a small build-file job to the upstream's build5MPath,
// which answers one file of about 5 MB in base64.
func buildJobRequest() request {
	return answerRequestTo(build5MPath, `{"jobType":"build-file","organization":{"id":1,"domain":"`+benchDomain+`"},"project":{"id":2},`+
		contractLanguages+`,"strings":[{"uniqId":"h::1","identifier":"a","text":"A"}]}`)
}

// preExportJobRequest is a pre-export job to the upstream's
// preExport5MPath, which answers about 5 MB of strings, its own sent by
// URL: stringsURL, fetched only by a gateway with inline.
func preExportJobRequest(stringsURL string) request {
	return answerRequestTo(preExport5MPath, `{"jobType":"file-pre-export","organization":{"id":1,"domain":"`+benchDomain+`"},"project":{"id":2},`+
		contractLanguages+`,"stringsUrl":"`+stringsURL+`"}`)
}

// answerRequestTo is a POST of the job body to path.
func answerRequestTo(path, body string) request {
	return request{
		method:  http.MethodPost,
		path:    path,
		headers: [][2]string{{"Content-Type", "application/json"}},
		body:    []byte(body),
	}
}

// apiRequest is a GET of the app's API with a bearer token.
func apiRequest(token string) request {
	return request{
		method:  http.MethodGet,
		path:    "/api/projects",
		headers: [][2]string{{"Authorization", "Bearer " + token}},
	}
}

// mintToken gets a one-hour HS256 token for benchSecret and the audience
// benchClientID from the built binary's `service-token` subcommand, and
// mints one itself when the subcommand is missing or fails. withOrg adds
// the benchmark organization. The second result says which way was used.
func mintToken(caddyBin string, withOrg bool) (string, string, error) {
	args := []string{"service-token", "--secret", benchSecret, "--lifetime", "1h", "--audience", benchClientID}
	if withOrg {
		args = append(args, "--domain", benchDomain, "--organization-id", fmt.Sprint(benchOrgID))
	}
	cmd := exec.Command(caddyBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	tok := strings.TrimSpace(string(out))
	if err == nil && looksLikeJWT(tok) {
		return tok, "from caddy service-token", nil
	}
	why := "printed no token"
	if err != nil {
		why = err.Error() // an exit status; the command line holds the secret, so it is not quoted
	}
	tok, err = mintHS256(benchSecret, withOrg, time.Now())
	return tok, "minted by the bench (caddy service-token: " + why + ")", err
}

func looksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || strings.ContainsAny(s, " \n\t") {
		return false
	}
	for _, p := range parts[:2] {
		if _, err := base64.RawURLEncoding.DecodeString(p); err != nil || p == "" {
			return false
		}
	}
	return true
}

// mintHS256 signs a token the way `caddy service-token` does, so that the
// emulator accepts it too: iss service-emulator, aud the demo client, sub,
// iat, exp, and with withOrg the domain claim and context.organization_id.
func mintHS256(secret string, withOrg bool, now time.Time) (string, error) {
	claims := map[string]any{
		"iss": "service-emulator",
		"aud": benchClientID,
		"sub": "7",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if withOrg {
		claims["domain"] = benchDomain
		claims["context"] = map[string]any{"organization_id": benchOrgID, "user_id": 7}
	}
	header, err := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}
