package emulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/servicegate/servicegate/descriptor"
)

// An Installation is an app as the emulated service knows it once it has
// read the app's descriptor: it calls the app's declared modules the way
// the service would, so a developer can try a whole app on one machine.
type Installation struct {
	// Descriptor is the app's descriptor.
	Descriptor *descriptor.Descriptor
	// AppURL is the app's base address as the service reaches it (the
	// gateway in front of it), e.g. http://localhost:8080.
	AppURL string
	// AppSecret signs webhook deliveries.
	AppSecret string
	// OrganizationID and Domain name the organization that installed
	// the app.
	OrganizationID int64
	Domain         string
	// Client makes the calls; nil uses http.DefaultClient.
	Client *http.Client
}

// sampleDelivery is a bulk delivery of one event of each name, as the
// service sends it: each event names itself and carries the objects of
// its own (see sampleEvent), never another event's sample renamed.
func sampleDelivery(names []string) []byte {
	events := make([]map[string]any, 0, len(names))
	for _, e := range names {
		events = append(events, sampleEvent(e))
	}
	body, _ := json.MarshalIndent(map[string]any{"events": events}, "", "  ")
	return body
}

// sampleEvent is one event of a sample delivery: the objects the
// interface shows for the project events (project, targetLanguage), and
// for the others the objects their names imply: the project every event
// happens in, the object the name starts with (a file for file.*, a
// string for string.*), and the target language of what is translated or
// approved.
func sampleEvent(name string) map[string]any {
	event := map[string]any{
		"event":   name,
		"project": map[string]any{"id": "1", "identifier": "demo-project", "name": "Demo project"},
	}
	object, action, _ := strings.Cut(name, ".")
	switch object {
	case "project":
	case "file":
		event["file"] = map[string]any{"id": "7", "name": "strings.kv", "projectId": "1"}
	case "string":
		event["string"] = map[string]any{"id": "12", "identifier": "greeting", "text": "Hello", "fileId": "7", "projectId": "1"}
	default:
		if _, taken := event[object]; !taken && object != "" && object != "targetLanguage" {
			event[object] = map[string]any{"id": "1", "projectId": "1"}
		}
	}
	if object == "project" || strings.HasPrefix(action, "translat") || strings.HasPrefix(action, "approv") {
		event["targetLanguage"] = map[string]any{"id": "uk", "name": "Ukrainian"}
	}
	return event
}

// Call is one request the emulated service made to the app and the app's
// answer.
type Call struct {
	// ID is the call's id in the emulator's console, 0 when the console
	// did not record it.
	ID int64
	// Kind and Key name the module called; Job is the job type, or
	// "webhook".
	Kind, Key, Job string
	// URL is the address called.
	URL string
	// Status and Body are the app's answer (Body capped at 1 MiB).
	Status int
	Body   []byte
	// Err is set when no answer came.
	Err error
}

// OK reports whether the app acknowledged the call with a 2xx answer.
func (c Call) OK() bool { return c.Err == nil && c.Status >= 200 && c.Status <= 299 }

// SendEvents sends each webhook module one signed bulk delivery holding
// every event it declares, with the module's key, as the service does.
func (in *Installation) SendEvents(ctx context.Context) []Call {
	var calls []Call
	for _, w := range in.Descriptor.Webhooks {
		body := sampleDelivery(w.Events)
		call := Call{Kind: descriptor.KindWebhook, Key: w.Key, Job: "webhook", URL: in.url(w.Module)}
		ctx := withCall(ctx, callMeta{kind: kindDelivery, org: in.Domain, module: w.Key})
		call.Status, call.Body, call.Err = SendDelivery(ctx, in.Client, call.URL, Delivery{
			Body:           body,
			Secret:         in.AppSecret,
			OrganizationID: fmt.Sprint(in.OrganizationID),
			Domain:         in.Domain,
			ModuleKey:      w.Key,
		})
		call.ID = recordedID(ctx)
		calls = append(calls, call)
	}
	return calls
}

// SendJobs runs the service's file jobs for a source file: for each
// custom-file-format module a parse-file job with the file, then a
// build-file job with the strings the app parsed (each given a
// translation); for each file-pre-export module a file-pre-export job
// with those strings. Without a custom-file-format module, or when
// parsing fails, the pre-export job carries one string made from the
// file's name.
func (in *Installation) SendJobs(ctx context.Context, fileName string, content []byte) []Call {
	var calls []Call
	var parsed []map[string]any
	for _, f := range in.Descriptor.FileFormats {
		parse := in.job(ctx, descriptor.KindCustomFileFormat, f.Module, "parse-file", fileName, content, nil)
		calls = append(calls, parse)
		strs := stringsOf(parse)
		if strs == nil {
			continue
		}
		if parsed == nil {
			parsed = strs
		}
		calls = append(calls, in.job(ctx, descriptor.KindCustomFileFormat, f.Module, "build-file", fileName, content, translated(strs, true, ukPrefix)))
	}
	if parsed == nil {
		parsed = []map[string]any{{"identifier": fileName, "text": fileName}}
	}
	for _, p := range in.Descriptor.PreExports {
		calls = append(calls, in.job(ctx, descriptor.KindFilePreExport, p.Module, "file-pre-export", fileName, content, preExportStrings(parsed)))
	}
	return calls
}

func (in *Installation) url(m descriptor.Module) string {
	return strings.TrimSuffix(in.AppURL, "/") + m.URL
}

// job sends one job and reads the answer.
func (in *Installation) job(ctx context.Context, kind string, m descriptor.Module, jobType, fileName string, content []byte, strs []map[string]any) (call Call) {
	call = Call{Kind: kind, Key: m.Key, Job: jobType, URL: in.url(m)}
	ctx = withCall(ctx, callMeta{kind: jobType, org: in.Domain, module: m.Key})
	defer func() { call.ID = recordedID(ctx) }()
	body, err := json.Marshal(in.jobBody(jobType, fileName, content, strs))
	if err != nil {
		call.Err = err
		return call
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(body))
	if err != nil {
		call.Err = err
		return call
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Service-Module")
	client := in.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		call.Err = fmt.Errorf("%s job to %s: %w", jobType, req.URL.Redacted(), err)
		return call
	}
	defer resp.Body.Close()
	call.Status = resp.StatusCode
	call.Body, call.Err = io.ReadAll(io.LimitReader(resp.Body, maxJobAnswer))
	return call
}

// maxJobAnswer caps what is read of an answer to a job: the service takes
// 5 MiB at most.
const maxJobAnswer = 5 << 20

// jobBody is a job as the service sends it: the organization, project and
// language objects of the interface, the file, and strings where the job
// type carries them.
func (in *Installation) jobBody(jobType, fileName string, content []byte, strs []map[string]any) map[string]any {
	return in.JobBody(jobType, JobOptions{FileName: fileName, Content: content, Strings: strs})
}

// JobOptions shape a job of JobBody: how its file and strings travel, and
// into which languages.
type JobOptions struct {
	// FileName is file.name.
	FileName string
	// Content is sent base64 as file.content, unless ContentURL is set,
	// which is sent as file.contentUrl instead.
	Content    []byte
	ContentURL string
	// Strings are sent inline as strings, unless StringsURL is set (an
	// NDJSON file of them), which is sent as stringsUrl instead; neither
	// is sent with a parse-file job.
	Strings    []map[string]any
	StringsURL string
	// Targets are the ids of the target languages (see Language). nil
	// sends none with a parse-file job (a source upload) and Ukrainian
	// with the others.
	Targets []string
}

// JobBody is a job of jobType to the app as the service sends it: the
// organization, project and language objects of the interface, the file,
// and strings where the job type carries them.
func (in *Installation) JobBody(jobType string, o JobOptions) map[string]any {
	apiBase := "https://" + in.Domain + ".service.example"
	file := map[string]any{"id": 1, "name": o.FileName}
	if o.ContentURL != "" {
		file["contentUrl"] = o.ContentURL
	} else {
		file["content"] = base64.StdEncoding.EncodeToString(o.Content)
	}
	job := map[string]any{
		"jobType": jobType,
		"organization": map[string]any{
			"id": in.OrganizationID, "domain": in.Domain,
			"baseUrl": apiBase, "apiBaseUrl": apiBase + "/api/v2",
		},
		"project":        map[string]any{"id": 1, "identifier": "demo-project", "name": "Demo project"},
		"file":           file,
		"sourceLanguage": Language("en"),
	}
	targets := o.Targets
	if targets == nil && jobType != "parse-file" {
		targets = []string{"uk"}
	}
	langs := make([]any, 0, len(targets))
	for _, id := range targets {
		langs = append(langs, Language(id))
	}
	job["targetLanguages"] = langs
	if jobType != "parse-file" {
		if o.StringsURL != "" {
			job["stringsUrl"] = o.StringsURL
		} else {
			job["strings"] = o.Strings
		}
	}
	return job
}

// languages are the languages the emulated service sends jobs in: their
// names and plural categories.
var languages = map[string]struct {
	name    string
	plurals []string
}{
	"en": {"English", []string{"one", "other"}},
	"uk": {"Ukrainian", []string{"one", "few", "many", "other"}},
	"de": {"German", []string{"one", "other"}},
	"fr": {"French", []string{"one", "many", "other"}},
}

// Language is the language object of the interface for id (en, uk, de or
// fr; any other id gets the plural categories one and other).
func Language(id string) map[string]any {
	l, ok := languages[id]
	if !ok {
		l.name, l.plurals = id, []string{"one", "other"}
	}
	return language(id, l.name, l.plurals)
}

// SampleDelivery is a bulk delivery of one event of each name, as the
// service sends them.
func SampleDelivery(names []string) []byte { return sampleDelivery(names) }

func language(id, name string, plurals []string) map[string]any {
	return map[string]any{
		"id": id, "name": name, "editorCode": id, "twoLettersCode": id, "threeLettersCode": id,
		"locale": id, "androidCode": id, "osxCode": id, "osxLocale": id,
		"pluralCategoryNames": plurals, "pluralRules": "",
	}
}

// stringsOf is the data.strings of a parse-file answer, nil when the call
// failed or the answer carries no inline strings.
func stringsOf(c Call) []map[string]any {
	if !c.OK() {
		return nil
	}
	var answer struct {
		Data struct {
			Strings []map[string]any `json:"strings"`
		} `json:"data"`
	}
	if json.Unmarshal(c.Body, &answer) != nil {
		return nil
	}
	return answer.Data.Strings
}

// translated gives each string an id (as build-file jobs carry) and a
// translation into uk, tr of its text; withIDs drops what build-file
// records lack.
func translated(strs []map[string]any, withIDs bool, tr func(text any) any) []map[string]any {
	out := make([]map[string]any, 0, len(strs))
	for i, s := range strs {
		r := make(map[string]any, len(s)+2)
		for k, v := range s {
			if k == "previewId" {
				continue
			}
			r[k] = v
		}
		if withIDs {
			r["id"] = i + 1
		}
		if text, ok := s["text"]; ok {
			r["translations"] = map[string]any{"uk": map[string]any{"text": tr(text), "status": "translated"}}
		}
		out = append(out, r)
	}
	return out
}

// ukPrefix is the translation SendJobs gives a text: "uk: " before it.
func ukPrefix(text any) any {
	if t, ok := text.(string); ok {
		return "uk: " + t
	}
	return text
}

// preExportStrings are strs as a file-pre-export job carries them: each
// with a uniqId (a hash, a double colon and a sequence number) and no
// previewId, id or customData.
func preExportStrings(strs []map[string]any) []map[string]any {
	out := translated(strs, false, ukPrefix)
	for i, r := range out {
		delete(r, "customData")
		sum := sha256.Sum256([]byte(fmt.Sprint(r["identifier"])))
		r["uniqId"] = hex.EncodeToString(sum[:16]) + "::" + fmt.Sprint(i+1)
	}
	return out
}
