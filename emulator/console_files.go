package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/respond"
)

// MaxFileSize is the largest file the service takes: 5 MiB.
const MaxFileSize = 5 << 20

// fileStore keeps the last few uploads and builds of the console's file
// round trip, so that a build can be compared with its upload and
// downloaded.
type fileStore struct {
	mu      sync.Mutex
	uploads []*upload
	builds  []*built
}

// keptFiles bounds the uploads, and the builds, kept.
const keptFiles = 4

// upload is a file uploaded to the console and the strings parsed from it.
type upload struct {
	id, name string
	content  []byte
	strings  []map[string]any
}

// built is the file a build-file job answered.
type built struct {
	id, name string
	content  []byte
}

func newFileStore() *fileStore { return &fileStore{} }

func (f *fileStore) addUpload(u *upload) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploads = append(f.uploads, u)
	if len(f.uploads) > keptFiles {
		f.uploads = f.uploads[1:]
	}
}

func (f *fileStore) addBuild(b *built) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, b)
	if len(f.builds) > keptFiles {
		f.builds = f.builds[1:]
	}
}

func (f *fileStore) upload(id string) *upload {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.uploads {
		if u.id == id {
			return u
		}
	}
	return nil
}

// setStrings replaces the strings of an upload with those of a new parse.
func (f *fileStore) setStrings(u *upload, strs []map[string]any) {
	f.mu.Lock()
	u.strings = strs
	f.mu.Unlock()
}

func (f *fileStore) parsed(u *upload) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return u.strings
}

func (f *fileStore) build(id string) *built {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.builds {
		if b.id == id {
			return b
		}
	}
	return nil
}

// matchingModules are the keys of the file modules whose
// signaturePatterns match a file: its name and its content, each pattern
// that is given. A module with no pattern matches nothing.
func matchingModules(formats []descriptor.FileFormat, name string, content []byte) []string {
	keys := []string{}
	for _, f := range formats {
		if patternsMatch(f.SignaturePatterns, name, content) {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

func patternsMatch(p descriptor.SignaturePatterns, name string, content []byte) bool {
	if p.FileName == "" && p.FileContent == "" {
		return false
	}
	for _, pat := range []struct {
		re   string
		text []byte
	}{{p.FileName, []byte(name)}, {p.FileContent, content}} {
		if pat.re == "" {
			continue
		}
		re, err := regexp.Compile(pat.re)
		if err != nil || !re.Match(pat.text) {
			return false
		}
	}
	return true
}

// fileAnswer is the answer of an upload or a parse.
type fileAnswer struct {
	Upload struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Size int    `json:"size"`
	} `json:"upload"`
	// Matches are the modules whose signaturePatterns match the file.
	Matches      []string         `json:"matches"`
	Module       string           `json:"module"`
	Organization string           `json:"organization"`
	Call         *callItem        `json:"call"`
	Strings      []map[string]any `json:"strings"`
	// Error says why no strings came.
	Error string `json:"error,omitempty"`
}

// uploadFile takes a file (the request's body, ?name= its name) and runs
// parse-file on it with the module ?module= names (default: the first
// whose signaturePatterns match, or else the first) for the organization
// ?organization= names (default: the first with an installation, or else
// the first).
func (c *console) uploadFile(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	name := q.Get("name")
	if name == "" || len(name) > 255 || strings.ContainsAny(name, "/\\\x00") {
		return failf(http.StatusBadRequest, "Name the file with ?name=: a file name without slashes, of at most 255 bytes.")
	}
	if r.ContentLength > MaxFileSize {
		return tooLarge(r.ContentLength)
	}
	content, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFileSize))
	if err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) {
			return tooLarge(-1)
		}
		return failf(http.StatusBadRequest, "The file could not be read.")
	}
	ctx, cancel := context.WithTimeout(r.Context(), jobTimeout)
	defer cancel()
	d, err := c.descriptor(ctx)
	if err != nil {
		return err
	}
	format, err := fileFormat(d, q.Get("module"), name, content)
	if err != nil {
		return err
	}
	org, err := c.jobOrganization(q.Get("organization"))
	if err != nil {
		return err
	}
	u := &upload{id: rand.Text(), name: name, content: content}
	answer := c.parse(ctx, d, format, org, u)
	c.files.addUpload(u)
	writeJSON(w, http.StatusOK, answer)
	return nil
}

func tooLarge(size int64) error {
	if size > 0 {
		return failf(http.StatusRequestEntityTooLarge, "The file is %s; the service takes files of at most 5 MB.", humanSize(size))
	}
	return failf(http.StatusRequestEntityTooLarge, "The file is larger than the 5 MB the service takes.")
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// fileFormat is the custom-file-format module of key; without a key,
// the first whose signaturePatterns match the file, or else the first.
func fileFormat(d *descriptor.Descriptor, key, name string, content []byte) (descriptor.FileFormat, error) {
	if len(d.FileFormats) == 0 {
		return descriptor.FileFormat{}, failf(http.StatusConflict, "The app's descriptor declares no custom-file-format module.")
	}
	var keys []string
	for _, f := range d.FileFormats {
		if key != "" && f.Key == key {
			return f, nil
		}
		keys = append(keys, respond.Quote(f.Key))
	}
	if key != "" {
		return descriptor.FileFormat{}, failf(http.StatusBadRequest, "The app declares no custom-file-format module %s; it declares %s.", respond.Quote(key), strings.Join(keys, ", "))
	}
	for _, f := range d.FileFormats {
		if patternsMatch(f.SignaturePatterns, name, content) {
			return f, nil
		}
	}
	return d.FileFormats[0], nil
}

// jobOrganization is the organization of domain; without one, the first
// with an installation, or else the first.
func (c *console) jobOrganization(domain string) (Organization, error) {
	if domain != "" {
		org, ok := c.s.organization(domain)
		if !ok {
			return Organization{}, failf(http.StatusNotFound, "There is no organization %s in the emulator.", respond.Quote(domain))
		}
		return org, nil
	}
	orgs := c.s.Organizations()
	for _, org := range orgs {
		if _, _, ok := c.s.installation(org.Domain); ok {
			return org, nil
		}
	}
	if len(orgs) == 0 {
		return Organization{}, failf(http.StatusConflict, "The emulator has no organization: add one first.")
	}
	return orgs[0], nil
}

// installationOf is the Installation the console's jobs go through.
func (c *console) installationOf(d *descriptor.Descriptor, org Organization) *Installation {
	return &Installation{Descriptor: d, AppURL: c.cfg.App, OrganizationID: org.ID, Domain: org.Domain, Client: c.client}
}

// parse runs parse-file on an upload and keeps its strings.
func (c *console) parse(ctx context.Context, d *descriptor.Descriptor, format descriptor.FileFormat, org Organization, u *upload) fileAnswer {
	var answer fileAnswer
	answer.Upload.ID, answer.Upload.Name, answer.Upload.Size = u.id, u.name, len(u.content)
	answer.Matches = matchingModules(d.FileFormats, u.name, u.content)
	answer.Module, answer.Organization = format.Key, org.Domain
	call := c.installationOf(d, org).job(ctx, descriptor.KindCustomFileFormat, format.Module, kindParseFile, u.name, u.content, nil)
	answer.Call = c.itemOfCall(call)
	strs, err := c.answerStrings(ctx, call)
	if err != nil {
		answer.Error = err.Error()
	}
	if strs == nil {
		strs = []map[string]any{}
	}
	answer.Strings = strs
	c.files.setStrings(u, strs)
	return answer
}

// itemOfCall is the item of a call the console recorded, or nil.
func (c *console) itemOfCall(call Call) *callItem {
	if e := c.log.get(call.ID); e != nil {
		item := itemOf(e)
		return &item
	}
	return nil
}

// jobData is what the console reads of a job's answer.
type jobData struct {
	Data struct {
		Strings    []map[string]any `json:"strings"`
		StringsURL string           `json:"stringsUrl"`
		Content    *string          `json:"content"`
		ContentURL string           `json:"contentUrl"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readJob reads a job's answer, or says why it failed.
func readJob(call Call) (jobData, error) {
	var data jobData
	if call.Err != nil {
		return data, fmt.Errorf("no answer came: %v", call.Err)
	}
	if err := json.Unmarshal(call.Body, &data); err != nil {
		return data, fmt.Errorf("the answer (%d) is not the JSON of a job's answer", call.Status)
	}
	if data.Error != nil {
		return data, fmt.Errorf("the answer (%d) is an error: %s", call.Status, data.Error.Message)
	}
	if call.Status < 200 || call.Status > 299 {
		return data, fmt.Errorf("the answer is %d", call.Status)
	}
	return data, nil
}

// answerStrings are the strings of a parse-file or file-pre-export answer,
// inline or by their URL (one JSON string record a line).
func (c *console) answerStrings(ctx context.Context, call Call) ([]map[string]any, error) {
	data, err := readJob(call)
	if err != nil {
		return nil, err
	}
	if data.Data.StringsURL == "" {
		return data.Data.Strings, nil
	}
	raw, err := c.fetch(ctx, data.Data.StringsURL)
	if err != nil {
		return nil, err
	}
	var strs []map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var s map[string]any
		if err := dec.Decode(&s); err != nil {
			return nil, errors.New("the strings at stringsUrl are not JSON records, one a line")
		}
		strs = append(strs, s)
	}
	return strs, nil
}

// fetch reads a payload the app handed over by URL.
func (c *console) fetch(ctx context.Context, address string) ([]byte, error) {
	if err := checkCallURL(address); err != nil {
		return nil, errors.New("the answer names a URL that is not an http or https address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: c.cfg.Transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading %s: %s", req.URL.Redacted(), resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, MaxFileSize+1))
}

// jobRequest is the request of a job on an upload.
type jobRequest struct {
	Module       string `json:"module"`
	Organization string `json:"organization"`
	// Pseudo pseudo-translates the strings of a build.
	Pseudo bool `json:"pseudo"`
	// Strings, when given, are built instead of the parsed ones.
	Strings []map[string]any `json:"strings"`
}

// buildAnswer is the answer of a build.
type buildAnswer struct {
	Call  *callItem `json:"call"`
	Build *struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Size     int    `json:"size"`
		Download string `json:"download"`
	} `json:"build"`
	// Identical says the build of unchanged strings equals the upload
	// (null for a pseudo-translated build); Difference is where they
	// first differ.
	Identical  *bool       `json:"identical"`
	Difference *difference `json:"difference,omitempty"`
	Error      string      `json:"error,omitempty"`
}

// preExportAnswer is the answer of a pre-export.
type preExportAnswer struct {
	Call    *callItem        `json:"call"`
	Strings []map[string]any `json:"strings"`
	Changed []stringChange   `json:"changed"`
	Error   string           `json:"error,omitempty"`
}

// stringChange is a string the pre-export changed.
type stringChange struct {
	Identifier string `json:"identifier"`
	Before     any    `json:"before"`
	After      any    `json:"after"`
}

func (c *console) fileJob(uploadID, job string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		u := c.files.upload(uploadID)
		if u == nil {
			return failf(http.StatusNotFound, "There is no upload %s: upload the file again (the console keeps the last %d).", respond.Quote(uploadID), keptFiles)
		}
		if job != "parse" && job != "build" && job != "pre-export" {
			return failf(http.StatusNotFound, "An upload's jobs are parse, build and pre-export, not %s.", respond.Quote(job))
		}
		var req jobRequest
		if err := readRequest(w, r, &req); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), jobTimeout)
		defer cancel()
		d, err := c.descriptor(ctx)
		if err != nil {
			return err
		}
		org, err := c.jobOrganization(req.Organization)
		if err != nil {
			return err
		}
		switch job {
		case "parse":
			format, err := fileFormat(d, req.Module, u.name, u.content)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, c.parse(ctx, d, format, org, u))
		case "build":
			format, err := fileFormat(d, req.Module, u.name, u.content)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, c.build(ctx, d, format, org, u, req))
		default:
			answer, err := c.preExport(ctx, d, org, u, req)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, answer)
		}
		return nil
	}
}

// build runs build-file with the strings translated as they are, or
// pseudo-translated, and compares a build of unchanged strings with the
// upload.
func (c *console) build(ctx context.Context, d *descriptor.Descriptor, format descriptor.FileFormat, org Organization, u *upload, req jobRequest) buildAnswer {
	strs := req.Strings
	if strs == nil {
		strs = c.files.parsed(u)
	}
	tr := func(text any) any { return text }
	if req.Pseudo {
		tr = pseudoTranslate
	}
	call := c.installationOf(d, org).job(ctx, descriptor.KindCustomFileFormat, format.Module, kindBuildFile, u.name, u.content, translated(strs, true, tr))
	answer := buildAnswer{Call: c.itemOfCall(call)}
	data, err := readJob(call)
	var content []byte
	switch {
	case err != nil:
	case data.Data.Content != nil:
		content, err = base64.StdEncoding.DecodeString(*data.Data.Content)
		if err != nil {
			err = errors.New("the answer's data.content is not base64")
		}
	case data.Data.ContentURL != "":
		content, err = c.fetch(ctx, data.Data.ContentURL)
	default:
		err = errors.New("the answer has neither data.content nor data.contentUrl")
	}
	if err != nil {
		answer.Error = err.Error()
		return answer
	}
	b := &built{id: rand.Text(), name: u.name, content: content}
	c.files.addBuild(b)
	answer.Build = &struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Size     int    `json:"size"`
		Download string `json:"download"`
	}{b.id, b.name, len(content), APIPrefix + "files/builds/" + b.id}
	if !req.Pseudo && req.Strings == nil {
		same := bytes.Equal(content, u.content)
		answer.Identical = &same
		if !same {
			answer.Difference = firstDifference(u.content, content)
		}
	}
	return answer
}

// difference is where a build first differs from its upload.
type difference struct {
	// Offset is the first byte that differs, Line and Column (from 1)
	// where it is in the upload.
	Offset int `json:"offset"`
	Line   int `json:"line"`
	Column int `json:"column"`
	// Expected and Got are the upload's and the build's text from the
	// start of that line, a little of each.
	Expected string `json:"expected"`
	Got      string `json:"got"`
}

func firstDifference(want, got []byte) *difference {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	start := bytes.LastIndexByte(want[:i], '\n') + 1
	d := &difference{Offset: i, Line: bytes.Count(want[:i], []byte{'\n'}) + 1, Column: utf8.RuneCount(want[start:i]) + 1}
	snippet := func(b []byte) string {
		b = b[min(start, len(b)):]
		if len(b) > 80 {
			b = b[:80]
		}
		if end := bytes.IndexByte(b, '\n'); end >= 0 {
			b = b[:end+1]
		}
		if len(b) == 0 {
			return "(the end of the file)"
		}
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	d.Expected, d.Got = snippet(want), snippet(got)
	return d
}

func (c *console) preExport(ctx context.Context, d *descriptor.Descriptor, org Organization, u *upload, req jobRequest) (preExportAnswer, error) {
	if len(d.PreExports) == 0 {
		return preExportAnswer{}, failf(http.StatusConflict, "The app's descriptor declares no file-pre-export module.")
	}
	module := d.PreExports[0]
	if req.Module != "" {
		found := false
		for _, p := range d.PreExports {
			if p.Key == req.Module {
				module, found = p, true
			}
		}
		if !found {
			return preExportAnswer{}, failf(http.StatusBadRequest, "The app declares no file-pre-export module %s.", respond.Quote(req.Module))
		}
	}
	strs := req.Strings
	if strs == nil {
		strs = c.files.parsed(u)
	}
	sent := preExportStrings(strs)
	call := c.installationOf(d, org).job(ctx, descriptor.KindFilePreExport, module.Module, kindPreExport, u.name, u.content, sent)
	answer := preExportAnswer{Call: c.itemOfCall(call), Changed: []stringChange{}}
	after, err := c.answerStrings(ctx, call)
	if err != nil {
		answer.Error = err.Error()
		answer.Strings = []map[string]any{}
		return answer, nil
	}
	answer.Strings = after
	answer.Changed = changedStrings(sent, after)
	return answer, nil
}

// changedStrings lists the strings of after that differ from those sent
// with the same uniqId (or identifier), and those added or removed.
func changedStrings(sent, after []map[string]any) []stringChange {
	key := func(s map[string]any) string {
		if id, ok := s["uniqId"].(string); ok {
			return id
		}
		return fmt.Sprint(s["identifier"])
	}
	before := make(map[string]map[string]any, len(sent))
	for _, s := range sent {
		before[key(s)] = s
	}
	changes := []stringChange{}
	seen := map[string]bool{}
	for _, s := range after {
		k := key(s)
		seen[k] = true
		b, ok := before[k]
		if !ok {
			changes = append(changes, stringChange{Identifier: fmt.Sprint(s["identifier"]), After: s})
			continue
		}
		bj, _ := json.Marshal(b)
		aj, _ := json.Marshal(s)
		if !bytes.Equal(bj, aj) {
			changes = append(changes, stringChange{Identifier: fmt.Sprint(s["identifier"]), Before: b, After: s})
		}
	}
	for _, s := range sent {
		if !seen[key(s)] {
			changes = append(changes, stringChange{Identifier: fmt.Sprint(s["identifier"]), Before: s})
		}
	}
	return changes
}

func (c *console) downloadBuild(id string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		b := c.files.build(id)
		if b == nil {
			return failf(http.StatusNotFound, "There is no build %s: build the file again (the console keeps the last %d).", respond.Quote(id), keptFiles)
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="`+strings.NewReplacer(`"`, "", "\r", "", "\n", "").Replace(b.name)+`"`)
		h.Set("Content-Length", strconv.Itoa(len(b.content)))
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b.content)
		}
		return nil
	}
}

// pseudoTranslate makes a pseudo-translation of a text (or of each plural
// form of one): accented letters, about a third longer, between brackets,
// placeholders in braces left as they are.
func pseudoTranslate(text any) any {
	switch t := text.(type) {
	case string:
		return pseudo(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for form, v := range t {
			out[form] = pseudoTranslate(v)
		}
		return out
	}
	return text
}

var accents = map[rune]rune{
	'a': 'á', 'c': 'ç', 'e': 'é', 'i': 'í', 'n': 'ñ', 'o': 'ö', 'u': 'ü', 'y': 'ý', 's': 'š', 'z': 'ž',
	'A': 'Á', 'C': 'Ç', 'E': 'É', 'I': 'Í', 'N': 'Ñ', 'O': 'Ö', 'U': 'Ü', 'Y': 'Ý', 'S': 'Š', 'Z': 'Ž',
}

func pseudo(s string) string {
	var b strings.Builder
	b.WriteString("[")
	depth, n := 0, 0
	for _, r := range s {
		switch {
		case r == '{':
			depth++
		case r == '}' && depth > 0:
			depth--
		case depth == 0:
			if a, ok := accents[r]; ok {
				r = a
			}
		}
		b.WriteRune(r)
		n++
	}
	b.WriteString(" " + strings.Repeat("~", (n+2)/3) + "]")
	return b.String()
}
