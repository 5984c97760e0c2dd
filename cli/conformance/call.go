package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// exchange is one request of a case and its answer.
type exchange struct {
	url    string
	header http.Header // sent beside Content-Type
	body   []byte
	// served are the files and strings the request names by URL, served
	// by the run while it lasts
	served []servedDoc

	answered bool
	status   int
	size     int64  // bytes of the answer, all of them
	answer   []byte // the answer, up to MaxInline+1 bytes
	err      error  // no answer
	timeout  time.Duration
}

// servedDoc is a file or strings served at url for a request.
type servedDoc struct {
	name string
	url  string
	b    []byte
}

// post sends body to url the way the service does, and reads the answer:
// all of it is counted, at most MaxInline+1 bytes of it kept, so that a
// huge answer costs the run no more memory than one the service takes.
func (p *plan) post(ctx context.Context, url string, header http.Header, body []byte, served ...servedDoc) *exchange {
	ex := &exchange{url: url, header: header, body: body, served: served, timeout: p.client.Timeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		ex.err = err
		return ex
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := p.client.Do(req)
	if err != nil {
		ex.err = err
		return ex
	}
	defer resp.Body.Close()
	ex.answered, ex.status = true, resp.StatusCode
	ex.answer, ex.size, ex.err = readAnswer(resp.Body, MaxInline+1)
	return ex
}

// readAnswer reads r to its end, keeping at most max bytes, and returns
// what it kept and how many bytes there were.
func readAnswer(r io.Reader, max int64) ([]byte, int64, error) {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, max))
	if err != nil {
		return buf.Bytes(), n, err
	}
	rest, err := io.Copy(io.Discard, r)
	return buf.Bytes(), n + rest, err
}

// readCapped reads at most max bytes of r; more is an error.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("it is over %d MB", max>>20)
	}
	return b, nil
}

// maxFetched caps a payload the app hands over by URL: a few times what
// the service takes inline.
const maxFetched = 64 << 20

// fetch downloads a payload the app's answer names by URL (stringsUrl,
// contentUrl, previewUrl), as the service does.
func (p *plan) fetch(ctx context.Context, what, address string) ([]byte, string) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Sprintf("data.%s is not an http or https address", what)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return nil, fmt.Sprintf("data.%s is not an address the service can fetch: %v", what, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Sprintf("data.%s could not be fetched: %v", what, noAnswer(err, p.client.Timeout))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("data.%s answered %d, not 200 with the payload", what, resp.StatusCode)
	}
	b, err := readCapped(resp.Body, maxFetched)
	if err != nil {
		return nil, fmt.Sprintf("data.%s could not be fetched whole: %v", what, err)
	}
	return b, ""
}

// noAnswer says why a request got no answer.
func noAnswer(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s (the most a call may take, --timeout; the service waits 2 minutes)", timeout)
	}
	if errors.As(err, &ue) {
		return "no answer: " + ue.Err.Error()
	}
	return "no answer: " + err.Error()
}

// jsonUnmarshal decodes b into v, numbers kept as json.Number.
func jsonUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// mustJSON is v in JSON: values the run made itself or decoded from
// JSON, which always encode; null should one not.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}
