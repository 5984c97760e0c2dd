package conformance

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/emulator"
)

// refuseAll is a transport that makes no request: a fuzzed answer's URLs
// are never fetched.
type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no fetch in the fuzz test")
}

// FuzzJudgeAnswer feeds the answer checker any answer to each job type:
// it never panics, says why in a non-empty reason whenever the answer
// fails, and an answer that keeps every rule keeps its form too (a
// hostile case never fails what a valid one passes). The seeds run as
// an ordinary test.
func FuzzJudgeAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"data":{"strings":[]}}`,
		`{"data":{"strings":[{"identifier":"a","text":"b"},{"identifier":"a","text":"b"}]}}`,
		`{"data":{"strings":[{"previewId":1,"identifier":"a","text":"b"}],"preview":"PHAgaWQ9InN0cmluZ19wcmV2aWV3X2lkXzEiPjwvcD4="}}`,
		`{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{"one":"x","other":"y"},"translations":{"uk":{"text":{"one":"a","few":"b","many":"c","other":"d"},"status":{"one":"approved"}}}}]}}`,
		`{"data":{"stringsUrl":"http://127.0.0.1:1/s.ndjson","previewUrl":"http://127.0.0.1:1/p"}}`,
		`{"data":{"content":"YQ=="}}`,
		`{"data":{"contentUrl":"http://127.0.0.1:1/f"}}`,
		`{"error":{"message":"The file is empty."}}`,
		`{"error":{"message":1}}`,
		`{"data":{"strings":[{"uniqId":"5d41402abc4b2a76b9719d911017c592::1","identifier":"greeting","text":"x"}]}}`,
		`{"data":` + strings.Repeat("[", 200),
		`[]`, `null`, ``, "\xff",
	} {
		for _, status := range []int{200, 413, 502} {
			f.Add(status, []byte(seed))
		}
	}
	p := &plan{client: &http.Client{Timeout: time.Second, Transport: refuseAll{}}}
	jobs := []*contract.Job{
		testJob(f, contract.ParseFile, emulator.JobOptions{FileName: "a.kv", Content: []byte("a = b\n"), Targets: []string{"uk"}}),
		testJob(f, contract.BuildFile, emulator.JobOptions{FileName: "a.kv", Strings: []map[string]any{{"id": 1, "identifier": "a", "text": "b"}}}),
		testJob(f, contract.PreExport, emulator.JobOptions{FileName: "a.kv", Strings: preExportStrings()}),
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		ex := &exchange{answered: true, status: status, answer: body, size: int64(len(body)), timeout: time.Second}
		for _, job := range jobs {
			_, full := p.judgeJob(context.Background(), job, ex)
			form := judgeForm(job, ex)
			if full == "" && form != "" && job.Type != contract.PreExport {
				t.Errorf("%s: %q passes every rule and fails its form: %s", job.Type, body, form)
			}
			if full == "" && (status < 200 || status > 299) {
				t.Errorf("%s: a %d answer passes", job.Type, status)
			}
		}
	})
}
