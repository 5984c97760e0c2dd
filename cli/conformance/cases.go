package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// preCases are the cases of a file-pre-export module, in order.
var preCases = []string{"strings", "strings-url", "no-strings"}

// cases are every case of the descriptor, in order: the file formats,
// the pre-exports, the webhooks, the lifecycle events.
func (p *plan) allCases(files map[string]*sourceFile) []*testCase {
	var all []*testCase
	for _, ff := range p.desc.FileFormats {
		all = append(all, p.fileFormatCases(ff, files[ff.Key])...)
	}
	for _, pe := range p.desc.PreExports {
		all = append(all, p.preExportCases(pe)...)
	}
	for _, w := range p.desc.Webhooks {
		all = append(all, p.webhookCases(w)...)
	}
	return append(all, p.lifecycleCases()...)
}

// installation is the emulator's view of the app, whose job builders make
// the jobs the run sends.
func (p *plan) installation() *emulator.Installation {
	return &emulator.Installation{Descriptor: p.desc, AppURL: p.app, Domain: p.o.Domain, OrganizationID: p.o.OrganizationID}
}

// fileModule is a custom-file-format module and its file, with the calls
// several of its cases share: each made once.
type fileModule struct {
	p       *plan
	ff      descriptor.FileFormat
	f       *sourceFile
	targets []string

	sourceOnce, translationOnce, builtOnce, builtSourceOnce sync.Once
	source, translation                                     parsed
	built, builtSource                                      built
}

// parsed is a parse-file call and what it gave.
type parsed struct {
	ex     *exchange
	strs   []map[string]any
	reason string
}

// built is a build-file call, the strings it sent and the file it gave.
type built struct {
	ex     *exchange
	sent   []map[string]any
	file   []byte
	reason string
	skip   string
}

func (p *plan) fileFormatCases(ff descriptor.FileFormat, f *sourceFile) []*testCase {
	m := &fileModule{p: p, ff: ff, f: f, targets: []string{"uk"}}
	if ff.Multilingual {
		m.targets = []string{"uk", "de", "fr"}
	}
	var cs []*testCase
	add := func(job, name string, run func(context.Context) outcome) {
		c := &testCase{kind: descriptor.KindCustomFileFormat, module: ff.Key, job: job, name: name, run: run}
		if f == nil {
			c.run, c.skip = nil, fmt.Sprintf("no file in this module's format: pass one with --file %s=<path>", ff.Key)
		}
		cs = append(cs, c)
	}
	add(contract.ParseFile, "content", func(ctx context.Context) outcome {
		r := m.sourceStrings(ctx)
		return outcome{reason: r.reason, ex: r.ex}
	})
	add(contract.ParseFile, "content-url", func(ctx context.Context) outcome {
		return m.byURL(ctx, m.sourceStrings(ctx), nil)
	})
	add(contract.ParseFile, "translation-content", func(ctx context.Context) outcome {
		r := m.translationStrings(ctx)
		return outcome{reason: r.reason, ex: r.ex}
	})
	add(contract.ParseFile, "translation-content-url", func(ctx context.Context) outcome {
		return m.byURL(ctx, m.translationStrings(ctx), m.targets)
	})
	for _, name := range []string{"empty", "bom", "crlf", "repeated"} {
		add(contract.ParseFile, name, func(ctx context.Context) outcome { return m.hostile(ctx, name) })
	}
	add(contract.BuildFile, "strings", func(ctx context.Context) outcome {
		b := m.builtFile(ctx)
		return outcome{reason: b.reason, skip: b.skip, ex: b.ex}
	})
	add(contract.BuildFile, "strings-url", m.buildByURL)
	add(contract.BuildFile, "round-trip-translations", m.roundTripTranslations)
	add(contract.BuildFile, "round-trip-source", m.roundTripSource)
	return cs
}

// parse sends a parse-file job of content (by URL when byURL) into
// targets (none: a source upload), and judges the answer on every rule.
func (m *fileModule) parse(ctx context.Context, name string, content []byte, byURL bool, targets []string) parsed {
	o := emulator.JobOptions{FileName: name, Content: content, Targets: targets}
	var served []servedDoc
	if byURL {
		o.ContentURL = m.p.served.put(name, content)
		served = append(served, servedDoc{name: name, url: o.ContentURL, b: content})
	}
	if targets == nil {
		o.Targets = []string{}
	}
	ex, job, reason := m.p.sendJob(ctx, contract.CustomFileFormat, m.ff.Module, contract.ParseFile, o, served)
	if reason != "" {
		return parsed{ex: ex, reason: reason}
	}
	ans, reason := m.p.judgeJob(ctx, job, ex)
	return parsed{ex: ex, strs: ans.strs, reason: reason}
}

func (m *fileModule) sourceStrings(ctx context.Context) parsed {
	m.sourceOnce.Do(func() { m.source = m.parse(ctx, m.f.name, m.f.content, false, nil) })
	return m.source
}

func (m *fileModule) translationStrings(ctx context.Context) parsed {
	m.translationOnce.Do(func() { m.translation = m.parse(ctx, m.f.name, m.f.content, false, m.targets) })
	return m.translation
}

// byURL sends the file by contentUrl and judges the answer, which gives
// the strings the same file gave inline.
func (m *fileModule) byURL(ctx context.Context, inline parsed, targets []string) outcome {
	r := m.parse(ctx, m.f.name, m.f.content, true, targets)
	if r.reason == "" && inline.reason == "" {
		r.reason = sameStrings(inline.strs, r.strs, "content", "contentUrl")
	}
	return outcome{reason: r.reason, ex: r.ex}
}

// hostile sends a file made from the given one, and judges only the
// answer's form and the limits.
func (m *fileModule) hostile(ctx context.Context, name string) outcome {
	content, byURL := hostileFile(name, m.f.content)
	if content == nil {
		return outcome{skip: "the given file is empty: there is nothing to repeat"}
	}
	o := emulator.JobOptions{FileName: m.f.name, Content: content, Targets: []string{}}
	var served []servedDoc
	if byURL {
		o.ContentURL = m.p.served.put(m.f.name, content)
		served = append(served, servedDoc{name: m.f.name, url: o.ContentURL, b: content})
	}
	ex, job, reason := m.p.sendJob(ctx, contract.CustomFileFormat, m.ff.Module, contract.ParseFile, o, served)
	if reason == "" {
		reason = judgeForm(job, ex)
	}
	return outcome{reason: reason, ex: ex}
}

// hostileFile is the file of a hostile case made from content, and
// whether it goes by URL (a file near 5 MB, which cannot go inline within
// the limit: base64 makes it a third larger).
func hostileFile(name string, content []byte) ([]byte, bool) {
	switch name {
	case "empty":
		return []byte{}, false
	case "bom":
		return append([]byte("\xEF\xBB\xBF"), content...), false
	case "crlf":
		lf := bytes.ReplaceAll(content, []byte("\r\n"), []byte("\n"))
		return bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n")), false
	}
	if len(content) == 0 {
		return nil, true
	}
	n := (MaxInline - 1) / len(content)
	return bytes.Repeat(content, max(n, 1)), true
}

// buildStrings are the parsed strings as a build-file job carries them:
// with an id, without previewId, and with a translation into each target
// when translate.
func buildStrings(strs []map[string]any, targets []string, translate bool) []map[string]any {
	out := make([]map[string]any, 0, len(strs))
	for i, s := range strs {
		r := make(map[string]any, len(s)+2)
		for k, v := range s {
			if k != "previewId" && k != "translations" {
				r[k] = v
			}
		}
		r["id"] = i + 1
		if translate {
			trs := make(map[string]any, len(targets))
			for _, lang := range targets {
				trs[lang] = translationOf(s["text"], s["hasPlurals"] == true, lang)
			}
			r["translations"] = trs
		}
		out = append(out, r)
	}
	return out
}

// translationOf is the translation the run gives a text into lang: the
// text after "<lang>: ", each plural category of lang from the source's
// "other" form.
func translationOf(text any, plural bool, lang string) map[string]any {
	obj, isObj := text.(map[string]any)
	if !plural || !isObj {
		t, _ := text.(string)
		return map[string]any{"text": lang + ": " + t, "status": "translated"}
	}
	other, _ := obj["other"].(string)
	forms, status := map[string]any{}, map[string]any{}
	cats, _ := emulator.Language(lang)["pluralCategoryNames"].([]string)
	for _, c := range cats {
		forms[c], status[c] = lang+": "+other, "translated"
	}
	return map[string]any{"text": forms, "status": status}
}

// build sends a build-file job of strs (by stringsUrl when byURL, or
// when inline they would make the job larger than the 5 MB a job may be,
// as the service would send them) and judges the answer; the file it
// gave is in the result.
func (m *fileModule) build(ctx context.Context, strs []map[string]any, byURL bool, targets []string) built {
	o := emulator.JobOptions{FileName: m.f.name, Content: m.f.content, Strings: strs, Targets: targets}
	if !byURL && len(mustJSON(strs))+(len(m.f.content)+2)/3*4+64<<10 > MaxInline {
		byURL = true
	}
	var served []servedDoc
	if byURL {
		nd := ndjson(strs)
		o.StringsURL = m.p.served.put("strings.ndjson", nd)
		served = append(served, servedDoc{name: "strings.ndjson", url: o.StringsURL, b: nd})
	}
	ex, job, reason := m.p.sendJob(ctx, contract.CustomFileFormat, m.ff.Module, contract.BuildFile, o, served)
	if reason != "" {
		return built{ex: ex, sent: strs, reason: reason}
	}
	ans, reason := m.p.judgeJob(ctx, job, ex)
	return built{ex: ex, sent: strs, file: ans.file, reason: reason}
}

const needsContent = "needs the strings of parse-file/content, which did not pass"

func (m *fileModule) builtFile(ctx context.Context) built {
	m.builtOnce.Do(func() {
		src := m.sourceStrings(ctx)
		if src.reason != "" {
			m.built = built{skip: needsContent}
			return
		}
		m.built = m.build(ctx, buildStrings(src.strs, m.targets, true), false, m.targets)
	})
	return m.built
}

func (m *fileModule) builtSourceFile(ctx context.Context) built {
	m.builtSourceOnce.Do(func() {
		src := m.sourceStrings(ctx)
		if src.reason != "" {
			m.builtSource = built{skip: needsContent}
			return
		}
		m.builtSource = m.build(ctx, buildStrings(src.strs, m.targets, false), false, m.targets)
	})
	return m.builtSource
}

// buildByURL: the same strings by stringsUrl give the same file.
func (m *fileModule) buildByURL(ctx context.Context) outcome {
	src := m.sourceStrings(ctx)
	if src.reason != "" {
		return outcome{skip: needsContent}
	}
	b := m.build(ctx, buildStrings(src.strs, m.targets, true), true, m.targets)
	if inline := m.builtFile(ctx); b.reason == "" && inline.reason == "" && inline.skip == "" && !bytes.Equal(inline.file, b.file) {
		b.reason = fmt.Sprintf("the same strings build another file by stringsUrl (%d bytes) than inline (%d bytes)", len(b.file), len(inline.file))
	}
	return outcome{reason: b.reason, ex: b.ex}
}

// roundTripTranslations: the file built with translations parses back,
// as a translation import, to those translations.
func (m *fileModule) roundTripTranslations(ctx context.Context) outcome {
	b := m.builtFile(ctx)
	if b.skip != "" || b.reason != "" {
		return outcome{skip: "needs the file of build-file/strings, which did not pass"}
	}
	back := m.parse(ctx, m.f.name, b.file, !fitsInline(b.file), m.targets)
	if back.reason != "" {
		return outcome{reason: "the built file does not parse back: " + back.reason, ex: back.ex}
	}
	return outcome{reason: roundTripTranslations(b.sent, back.strs, m.targets), ex: back.ex}
}

// roundTripSource: the file built with no translation parses back, as a
// source upload, to the source strings.
func (m *fileModule) roundTripSource(ctx context.Context) outcome {
	b := m.builtSourceFile(ctx)
	if b.skip != "" {
		return outcome{skip: b.skip}
	}
	if b.reason != "" {
		return outcome{reason: "building the file with no translation: " + b.reason, ex: b.ex}
	}
	back := m.parse(ctx, m.f.name, b.file, !fitsInline(b.file), nil)
	if back.reason != "" {
		return outcome{reason: "the built file does not parse back: " + back.reason, ex: back.ex}
	}
	return outcome{reason: roundTripSource(m.sourceStrings(ctx).strs, back.strs), ex: back.ex}
}

// fitsInline reports whether a job can carry file inline within 5 MB.
func fitsInline(file []byte) bool {
	return (len(file)+2)/3*4+64<<10 < MaxInline
}

// ndjson is strs as new-line delimited JSON, one record a line.
func ndjson(strs []map[string]any) []byte {
	var b bytes.Buffer
	for _, s := range strs {
		b.Write(mustJSON(s))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// sendJob sends one job to the module, built by the emulator's job
// builder, and checks it with the contract's request checker (the run's
// own jobs must pass it).
func (p *plan) sendJob(ctx context.Context, kind string, m descriptor.Module, jobType string, o emulator.JobOptions, served []servedDoc) (*exchange, *contract.Job, string) {
	body := mustJSON(p.installation().JobBody(jobType, o))
	job, err := contract.ParseJob(kind, bytes.NewReader(body))
	if err != nil {
		return nil, nil, "the run made a job the contract refuses (a defect of the run): " + err.Error()
	}
	if o.StringsURL != "" && jobType == contract.PreExport {
		job.SetSentStrings(uniqIDs(o.Strings))
	}
	header := http.Header{"User-Agent": {"Service-Module"}}
	ctx = emulator.MarkCall(ctx, jobType, p.o.Domain, m.Key)
	return p.post(ctx, p.app+m.URL, header, body, served...), job, ""
}

func uniqIDs(strs []map[string]any) []string {
	ids := make([]string, 0, len(strs))
	for _, s := range strs {
		id, _ := s["uniqId"].(string)
		ids = append(ids, id)
	}
	return ids
}

// preExportStrings are the strings the run sends a file-pre-export
// module, made from the interface's string record (never from an app's
// parse, so that a parse defect never shows here): a plain string with
// every optional field, a plural string with plural translations and
// statuses, and one with an untranslated translation.
func preExportStrings() []map[string]any {
	return []map[string]any{
		{"uniqId": "5d41402abc4b2a76b9719d911017c592::1", "identifier": "greeting", "context": "The home page's title",
			"maxLength": 40, "isHidden": false, "hasPlurals": false, "labels": []string{"home"}, "text": "  Hello  ",
			"translations": map[string]any{"uk": map[string]any{"text": " Привіт ", "status": "approved"}}},
		{"uniqId": "7d793037a0760186574b0282f2f435e7::2", "identifier": "files", "hasPlurals": true,
			"text": map[string]any{"one": "%d file", "other": "%d files"},
			"translations": map[string]any{"uk": map[string]any{
				"text":   map[string]any{"one": "%d файл", "few": "%d файли", "many": "%d файлів", "other": "%d файлу"},
				"status": map[string]any{"one": "approved", "few": "translated", "many": "translated", "other": "untranslated"}}}},
		{"uniqId": "3d3c2b4e5f6a7b8c9d0e1f2a3b4c5d6e::3", "identifier": "farewell", "isHidden": true, "text": "Goodbye",
			"translations": map[string]any{"uk": map[string]any{"text": "", "status": "untranslated"}}},
	}
}

func (p *plan) preExportCases(pe descriptor.PreExport) []*testCase {
	var cs []*testCase
	for _, name := range preCases {
		cs = append(cs, &testCase{kind: descriptor.KindFilePreExport, module: pe.Key, job: contract.PreExport, name: name,
			run: func(ctx context.Context) outcome { return p.preExport(ctx, pe, name) }})
	}
	return cs
}

// preExport sends the run's strings (none for no-strings), inline or by
// URL, and judges the answer: as many strings, each with its uniqId.
func (p *plan) preExport(ctx context.Context, pe descriptor.PreExport, name string) outcome {
	strs := preExportStrings()
	if name == "no-strings" {
		strs = []map[string]any{}
	}
	o := emulator.JobOptions{FileName: "strings.txt", Content: []byte{}, Strings: strs, Targets: []string{"uk"}}
	var served []servedDoc
	if name == "strings-url" {
		nd := ndjson(strs)
		o.StringsURL = p.served.put("strings.ndjson", nd)
		served = append(served, servedDoc{name: "strings.ndjson", url: o.StringsURL, b: nd})
	}
	ex, job, reason := p.sendJob(ctx, contract.FilePreExport, pe.Module, contract.PreExport, o, served)
	if reason == "" {
		_, reason = p.judgeJob(ctx, job, ex)
	}
	return outcome{reason: reason, ex: ex}
}

func (p *plan) webhookCases(w descriptor.Webhook) []*testCase {
	var cs []*testCase
	add := func(name string, events []string) {
		cs = append(cs, &testCase{kind: descriptor.KindWebhook, module: w.Key, job: "delivery", name: name,
			run: func(ctx context.Context) outcome { return p.deliver(ctx, w, events) }})
	}
	for _, e := range w.Events {
		add(e, []string{e})
	}
	add("bulk", w.Events)
	return cs
}

// deliver sends one signed bulk delivery of events to the webhook module,
// as the service does, and judges the answer: 2xx.
func (p *plan) deliver(ctx context.Context, w descriptor.Webhook, events []string) outcome {
	body := emulator.SampleDelivery(events)
	secret, signedWith := p.deliverySecret(ctx)
	header := http.Header{
		"User-Agent":          {"Service-Webhook"},
		"X-Service-Id":        {fmt.Sprint(p.o.OrganizationID)},
		"X-Service-Domain":    {p.o.Domain},
		"X-Service-Signature": {emulator.SignDelivery(body, secret)},
		"X-Module-Key":        {w.Key},
	}
	ex := p.post(emulator.MarkCall(ctx, "delivery", p.o.Domain, w.Key), p.app+w.URL, header, body)
	reason := judgeAck(ex)
	if ex.answered && ex.status == http.StatusUnauthorized && reason != "" {
		reason += " (the delivery was signed with " + signedWith + ")"
	}
	return outcome{reason: reason, ex: ex}
}

// deliverySecret is the app secret that signs a delivery, and what it is,
// for a refusal's reason: the organization's installation secret, asked
// of the emulator, when the run goes through a gateway and no secret was
// given (the gateway verifies an installed organization's deliveries with
// that secret only); else Options.Secret. It is asked for each delivery,
// since an installation made during the run changes it.
func (p *plan) deliverySecret(ctx context.Context) (secret, what string) {
	given := "the secret of --secret: is it the app's?"
	if !p.o.InstallationSecret {
		return p.o.Secret, given
	}
	if !p.viaEmulator {
		return p.o.Secret, "the default app secret, --secret's: the app is not behind a servicegate gateway, so the emulator's installation secret was not asked for; is it the app's?"
	}
	api := strings.TrimSuffix(p.o.Emulator, "/") + emulator.APIPrefix + "organizations/" + url.PathEscape(p.o.Domain) + "/secret"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api, nil)
	if err != nil {
		return p.o.Secret, "the default app secret, --secret's: the emulator's address is not usable: " + err.Error()
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return p.o.Secret, fmt.Sprintf("the default app secret, --secret's: the emulator at %s (--emulator) could not be asked for %s's installation secret: %v", p.o.Emulator, p.o.Domain, err)
	}
	defer resp.Body.Close()
	raw, _ := readCapped(resp.Body, 64<<10)
	var answer struct {
		Secret string `json:"secret"`
	}
	if resp.StatusCode != http.StatusOK || jsonUnmarshal(raw, &answer) != nil || answer.Secret == "" {
		return p.o.Secret, fmt.Sprintf("the default app secret, --secret's, since the emulator at %s has no installation of the app for %s (it answered %d)", p.o.Emulator, p.o.Domain, resp.StatusCode)
	}
	return answer.Secret, fmt.Sprintf("the installation secret the emulator at %s holds for %s: does the gateway know this installation?", p.o.Emulator, p.o.Domain)
}

// lifecycleEvents are the lifecycle calls in the order the run makes
// them: an installation, its payment, its removal.
var lifecycleEvents = []string{emulator.EventInstalled, emulator.EventSubscriptionPaid, emulator.EventUninstall}

func (p *plan) lifecycleCases() []*testCase {
	var cs []*testCase
	paths := map[string]string{emulator.EventInstalled: p.desc.Events.Installed, emulator.EventUninstall: p.desc.Events.Uninstall,
		emulator.EventSubscriptionPaid: p.desc.Events.SubscriptionPaid}
	for _, e := range lifecycleEvents {
		if paths[e] == "" {
			continue
		}
		cs = append(cs, &testCase{kind: KindLifecycle, module: LifecycleModule, job: e, name: "call", last: true,
			run: func(ctx context.Context) outcome { return p.lifecycle(ctx, e, p.app+paths[e]) }})
	}
	return cs
}

// lifecycle makes one lifecycle call: through the emulator when the app
// is behind a gateway (which proves the call with the service), else
// straight to the app in the shape the gateway forwards.
func (p *plan) lifecycle(ctx context.Context, event, url string) outcome {
	if p.viaEmulator {
		req := emulator.LifecycleRequest{Event: event, Organization: p.o.Domain, URL: url}
		ex := p.post(ctx, strings.TrimSuffix(p.o.Emulator, "/")+emulator.LifecyclePath, nil, mustJSON(req))
		if !ex.answered {
			return outcome{reason: fmt.Sprintf("the app is behind a gateway, which has the service prove lifecycle calls, and the emulator at %s (--emulator) could not make the call: %s", p.o.Emulator, noAnswer(ex.err, ex.timeout)), ex: ex}
		}
		var a emulator.LifecycleAnswer
		if ex.status != http.StatusOK || jsonUnmarshal(ex.answer, &a) != nil {
			return outcome{reason: fmt.Sprintf("the emulator at %s (--emulator) could not make the call: %s", p.o.Emulator, judgeAck(ex)), ex: ex}
		}
		if a.Error != "" {
			return outcome{reason: "no answer: " + a.Error, ex: ex}
		}
		app := &exchange{answered: true, status: a.Status, answer: []byte(a.Answer)}
		return outcome{reason: judgeAck(app), ex: ex}
	}
	ex := p.post(emulator.MarkCall(ctx, event, p.o.Domain, ""), url, nil, p.toldBody(event))
	return outcome{reason: judgeAck(ex), ex: ex}
}

// toldBody is a lifecycle call as the gateway tells the app of it: what
// the service proved, no secret.
func (p *plan) toldBody(event string) []byte {
	body := map[string]any{"event": event, "appId": p.desc.Identifier, "clientId": p.desc.ClientID,
		"organizationId": p.o.OrganizationID, "domain": p.o.Domain, "baseUrl": "https://" + p.o.Domain + ".service.example"}
	switch event {
	case emulator.EventInstalled:
		body["userId"], body["installedAt"] = 1, "2026-01-01T00:00:00Z"
	case emulator.EventSubscriptionPaid:
		body["expires"] = "2099-12-31T23:59:59Z"
	}
	return mustJSON(body)
}
