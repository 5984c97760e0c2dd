// Package descriptor reads an app's descriptor, the JSON document through
// which the service knows an app: its identifier, its authentication and the
// modules it declares (custom-file-format, file-pre-export and webhook
// entries, each with the relative url the service calls). servicegate routes
// a site from it, so a defect in it is an endpoint left open or a delivery
// refused; Parse reports every defect at once, in words a person can act on.
package descriptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode"

	"github.com/servicegate/servicegate/internal/suggest"
	"github.com/servicegate/servicegate/urlpath"
)

// Module kinds, as the descriptor names them under "modules".
const (
	KindCustomFileFormat = "custom-file-format"
	KindFilePreExport    = "file-pre-export"
	KindWebhook          = "webhook"
)

// Environments a webhook module may name in "environments".
var Environments = []string{"service", "service-enterprise"}

// AuthenticationType is the authorization method an app declares in
// authentication.type for the subscription query to answer it.
const AuthenticationType = "service_app"

// MaxSize caps a descriptor: a real one is a few kilobytes.
const MaxSize = 1 << 20

// Descriptor is an app descriptor as servicegate uses it.
type Descriptor struct {
	// Identifier is the app identifier the subscription query names; it
	// may be empty.
	Identifier string
	// Name is the app's display name; it may be empty.
	Name string
	// BaseURL is the declared base address, or empty when the descriptor
	// leaves it to the gateway.
	BaseURL string
	// ClientID is authentication.clientId, or empty.
	ClientID string

	// FileFormats, PreExports and Webhooks are the declared modules, in
	// the descriptor's order.
	FileFormats []FileFormat
	PreExports  []PreExport
	Webhooks    []Webhook

	// Events are the lifecycle calls' paths (see Events).
	Events Events

	// Ignored names the module kinds the descriptor declares that
	// servicegate does not route specially; their urls get the default
	// (token-checked) treatment.
	Ignored []string
	// Others are the entries of those kinds, with their key and url when
	// they have them as strings: read to be listed, never checked.
	Others []Other

	raw map[string]json.RawMessage
}

// Module is what every declared module has.
type Module struct {
	// Key identifies the module within the app.
	Key string
	// URL is the path, relative to the app's base address, the service
	// calls. It is always a path starting with "/".
	URL string
}

// Modules lists every declared module the gateway routes: file formats,
// then pre-exports, then webhooks.
func (d *Descriptor) Modules() []Module {
	ms := make([]Module, 0, len(d.FileFormats)+len(d.PreExports)+len(d.Webhooks))
	for _, f := range d.FileFormats {
		ms = append(ms, f.Module)
	}
	for _, p := range d.PreExports {
		ms = append(ms, p.Module)
	}
	for _, w := range d.Webhooks {
		ms = append(ms, w.Module)
	}
	return ms
}

// Path is the request path the service calls for the module: URL without
// a query.
func (m Module) Path() string {
	if i := strings.IndexByte(m.URL, '?'); i >= 0 {
		return m.URL[:i]
	}
	return m.URL
}

// SignaturePatterns select files for a file module.
type SignaturePatterns struct {
	FileName    string
	FileContent string
}

// FileFormat is a custom-file-format module.
type FileFormat struct {
	Module
	Type              string
	Multilingual      bool
	SignaturePatterns SignaturePatterns
}

// PreExport is a file-pre-export module.
type PreExport struct {
	Module
	SignaturePatterns SignaturePatterns
}

// Webhook is a webhook module.
type Webhook struct {
	Module
	Events       []string
	Environments []string
}

// Defects is every defect found in one descriptor.
type Defects struct {
	// Source names the descriptor (a file or an address).
	Source string
	// List holds one sentence per defect.
	List []string
}

func (d *Defects) Error() string {
	var b strings.Builder
	src := d.Source
	if src == "" {
		src = "the app descriptor"
	}
	if len(d.List) == 1 {
		fmt.Fprintf(&b, "%s has a defect: %s", src, d.List[0])
		return b.String()
	}
	fmt.Fprintf(&b, "%s has %d defects:", src, len(d.List))
	for i, s := range d.List {
		fmt.Fprintf(&b, "\n  %d. %s", i+1, s)
	}
	return b.String()
}

func (d *Defects) add(format string, args ...any) {
	d.List = append(d.List, fmt.Sprintf(format, args...))
}

// Parse reads a descriptor and checks it. source names it in messages. A
// descriptor with defects yields a *Defects error listing all of them.
func Parse(source string, data []byte) (*Descriptor, error) {
	defects := &Defects{Source: source}
	if len(data) > MaxSize {
		defects.add("it is larger than %d bytes", MaxSize)
		return nil, defects
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		defects.add("it is not a JSON object (%s)", jsonProblem(err))
		return nil, defects
	}
	d := &Descriptor{raw: raw}
	d.Identifier = optionalString(defects, raw, "identifier", "identifier")
	d.Name = optionalString(defects, raw, "name", "name")
	d.BaseURL = optionalString(defects, raw, "baseUrl", "baseUrl")
	if d.BaseURL != "" {
		if u, err := url.Parse(d.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			defects.add("baseUrl %q is not an absolute http or https address", d.BaseURL)
		}
	}
	if a, ok := raw["authentication"]; ok {
		var auth map[string]json.RawMessage
		if json.Unmarshal(a, &auth) != nil || auth == nil {
			defects.add("authentication is not an object")
		} else {
			d.ClientID = optionalString(defects, auth, "clientId", "authentication.clientId")
		}
	}
	if m, ok := raw["modules"]; ok {
		d.parseModules(defects, m)
	}
	if _, ok := raw["modules"]; !ok && d.Identifier == "" {
		// An app's status or error answer in JSON is no descriptor: it
		// must never be published or kept as the last good copy.
		defects.add("it is not an app descriptor: it has neither an identifier nor modules")
	}
	if e, ok := raw["events"]; ok {
		d.parseEvents(defects, e)
	}
	if len(defects.List) > 0 {
		return nil, defects
	}
	return d, nil
}

// parseModules reads "modules" and checks every entry, then the keys and
// urls across all entries.
func (d *Descriptor) parseModules(defects *Defects, data json.RawMessage) {
	var kinds map[string]json.RawMessage
	if json.Unmarshal(data, &kinds) != nil || kinds == nil {
		defects.add("modules is not an object of module kinds")
		return
	}
	cost := &patternCost{}
	for _, kind := range sortedKeys(kinds) {
		var entries []json.RawMessage
		if json.Unmarshal(kinds[kind], &entries) != nil {
			defects.add("modules.%s is not an array of modules", kind)
			continue
		}
		switch kind {
		case KindCustomFileFormat, KindFilePreExport, KindWebhook:
		default:
			d.Ignored = append(d.Ignored, kind)
			d.Others = append(d.Others, readOthers(kind, entries)...)
			continue
		}
		for i, e := range entries {
			where := fmt.Sprintf("modules.%s[%d]", kind, i)
			var obj map[string]json.RawMessage
			if json.Unmarshal(e, &obj) != nil || obj == nil {
				defects.add("%s is not an object", where)
				continue
			}
			m := readModule(defects, &where, obj)
			switch kind {
			case KindCustomFileFormat:
				f := FileFormat{Module: m}
				f.Type = requiredString(defects, obj, "type", where)
				f.Multilingual = optionalBool(defects, obj, "multilingual", where)
				f.SignaturePatterns = readPatterns(defects, cost, obj, where)
				d.FileFormats = append(d.FileFormats, f)
			case KindFilePreExport:
				d.PreExports = append(d.PreExports, PreExport{Module: m, SignaturePatterns: readPatterns(defects, cost, obj, where)})
			case KindWebhook:
				w := Webhook{Module: m}
				w.Events = readEvents(defects, obj, where)
				w.Environments = readEnvironments(defects, obj, where)
				d.Webhooks = append(d.Webhooks, w)
			}
		}
	}
	d.checkUnique(defects)
}

// kindEdits is how many edits away from a kind servicegate routes another
// kind is taken for a slip: one, since the service has kinds two edits
// apart (file-pre-export and file-pre-import).
const kindEdits = 1

// routedKinds are the module kinds servicegate routes.
var routedKinds = []string{KindCustomFileFormat, KindFilePreExport, KindWebhook}

// LikelyDefects names each module kind the descriptor declares that is a
// letter off a kind servicegate routes (webhok, custom-file-formats): it
// is routed as any other kind, its urls behind the token check, so the
// service's calls to them would be refused. Other kinds the service has
// are not named.
func (d *Descriptor) LikelyDefects() []string {
	var out []string
	for _, kind := range d.Ignored {
		if near := suggest.Nearest(kind, routedKinds, kindEdits); near != "" {
			out = append(out, fmt.Sprintf("modules.%s is not a module kind servicegate routes; did you mean %q? "+
				"Its urls get the token check like every other path, so the service's calls to them are refused", kind, near))
		}
	}
	return out
}

// Other is an entry of a module kind servicegate does not route
// specially, such as a page of the app's UI.
type Other struct {
	Kind string
	Module
}

// readOthers reads the key and url of each entry of such a kind, leaving
// out what is not a string.
func readOthers(kind string, entries []json.RawMessage) []Other {
	var out []Other
	for _, e := range entries {
		var obj struct {
			Key any `json:"key"`
			URL any `json:"url"`
		}
		_ = json.Unmarshal(e, &obj)
		o := Other{Kind: kind}
		o.Key, _ = obj.Key.(string)
		o.URL, _ = obj.URL.(string)
		out = append(out, o)
	}
	return out
}

// readModule reads and checks key and url; where names the entry, and
// the key once it is known.
func readModule(defects *Defects, where *string, obj map[string]json.RawMessage) Module {
	m := Module{Key: requiredString(defects, obj, "key", *where)}
	if m.Key != "" {
		*where = fmt.Sprintf("%s (key %q)", *where, m.Key)
	}
	u := requiredString(defects, obj, "url", *where)
	if u == "" {
		return m
	}
	if problem := urlProblem(u); problem != "" {
		defects.add("%s: url %q %s", *where, u, problem)
		return m
	}
	m.URL = u
	return m
}

// urlProblem says what is wrong with a module url, or "" when it is a
// plain path the gateway can route exactly: "/" and segments of letters,
// digits and "-._~!$&'()+,=:@", without "." or ".." segments or empty
// ones. Anything else (a wildcard, a query, a fragment, an encoding,
// whitespace) could make a route that reaches more than the module, or a
// module url that the service and the gateway read differently.
func urlProblem(u string) string {
	switch {
	case strings.HasPrefix(u, "//") || strings.Contains(u, "://"):
		return "is absolute; a module url is a path relative to the app's base address, such as \"/webhooks\""
	case !strings.HasPrefix(u, "/"):
		if parsed, err := url.Parse(u); err == nil && parsed.Scheme != "" {
			return "is absolute; a module url is a path relative to the app's base address, such as \"/webhooks\""
		}
		return "must start with \"/\""
	}
	for _, c := range u {
		switch {
		case c == '*':
			return "has a wildcard \"*\"; a module url is one plain path, such as \"/webhooks\""
		case c == '?':
			return "has a query (\"?\"); a module url is a plain path, without a query"
		case c == '#':
			return "has a fragment (\"#\"), which the service never sends; a module url is a plain path"
		case c == '%':
			return "has a percent-encoding (\"%\"); write the path as plain characters"
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || unicode.IsSpace(c):
			return "has whitespace; a module url is a plain path"
		case !plainPathChar(c):
			return fmt.Sprintf("has the character %q; a module url is a plain path of letters, digits and - . _ ~ ! $ & ' ( ) + , = : @ between slashes", c)
		}
	}
	if u == "/" {
		return ""
	}
	for _, seg := range strings.Split(u[1:], "/") {
		switch seg {
		case ".", "..":
			return "has a \".\" or \"..\" segment"
		case "":
			return "has an empty segment (\"//\" or a trailing \"/\"); write it without"
		}
	}
	return ""
}

// plainPathChar tells whether c may stand in a module url: the characters
// RFC 3986 allows in a path segment unencoded, less ";" (a path
// parameter to many servers) and the reserved ones handled above.
func plainPathChar(c rune) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.ContainsRune("/-._~!$&'()+,=:@", c)
}

// checkUnique reports keys and paths declared by more than one module.
func (d *Descriptor) checkUnique(defects *Defects) {
	keys := map[string][]string{}
	paths := map[string][]string{}
	note := func(kind string, i int, m Module) {
		where := fmt.Sprintf("modules.%s[%d]", kind, i)
		if m.Key != "" {
			keys[m.Key] = append(keys[m.Key], where)
		}
		if m.URL != "" {
			// Two urls the gateway routes alike (another case) are one.
			p := urlpath.Canonical(m.Path())
			paths[p] = append(paths[p], where)
		}
	}
	for i, m := range d.FileFormats {
		note(KindCustomFileFormat, i, m.Module)
	}
	for i, m := range d.PreExports {
		note(KindFilePreExport, i, m.Module)
	}
	for i, m := range d.Webhooks {
		note(KindWebhook, i, m.Module)
	}
	for _, k := range sortedKeys(keys) {
		if len(keys[k]) > 1 {
			defects.add("key %q is used by %s; each module needs its own key", k, strings.Join(keys[k], " and "))
		}
	}
	for _, p := range sortedKeys(paths) {
		if len(paths[p]) > 1 {
			defects.add("url path %q is used by %s; each module needs its own url", p, strings.Join(paths[p], " and "))
		}
	}
}

func readPatterns(defects *Defects, cost *patternCost, obj map[string]json.RawMessage, where string) SignaturePatterns {
	raw, ok := obj["signaturePatterns"]
	if !ok || isNull(raw) {
		return SignaturePatterns{}
	}
	var sp map[string]json.RawMessage
	if json.Unmarshal(raw, &sp) != nil || sp == nil {
		defects.add("%s: signaturePatterns is not an object", where)
		return SignaturePatterns{}
	}
	p := SignaturePatterns{
		FileName:    optionalString(defects, sp, "fileName", where+": signaturePatterns.fileName"),
		FileContent: optionalString(defects, sp, "fileContent", where+": signaturePatterns.fileContent"),
	}
	for _, pat := range []struct{ name, re string }{{"fileName", p.FileName}, {"fileContent", p.FileContent}} {
		if pat.re != "" {
			cost.check(defects, where+": signaturePatterns."+pat.name, pat.re)
		}
	}
	return p
}

// regexpProblem is the part of a regexp error that says why.
func regexpProblem(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

func readEvents(defects *Defects, obj map[string]json.RawMessage, where string) []string {
	raw, ok := obj["events"]
	if !ok || isNull(raw) {
		defects.add("%s: events is missing; a webhook module lists the events that trigger it", where)
		return nil
	}
	var events []string
	if json.Unmarshal(raw, &events) != nil {
		defects.add("%s: events is not an array of event names", where)
		return nil
	}
	if len(events) == 0 {
		defects.add("%s: events is empty; a webhook module lists the events that trigger it", where)
		return nil
	}
	for _, e := range events {
		if strings.TrimSpace(e) == "" {
			defects.add("%s: events holds an empty event name", where)
			return nil
		}
	}
	return events
}

func readEnvironments(defects *Defects, obj map[string]json.RawMessage, where string) []string {
	raw, ok := obj["environments"]
	if !ok || isNull(raw) {
		return nil
	}
	var envs []string
	if json.Unmarshal(raw, &envs) != nil {
		defects.add("%s: environments is not an array of strings", where)
		return nil
	}
	for _, e := range envs {
		known := false
		for _, k := range Environments {
			known = known || e == k
		}
		if !known {
			defects.add("%s: environments holds %q; the known values are %q and %q", where, e, Environments[0], Environments[1])
		}
	}
	return envs
}

func requiredString(defects *Defects, obj map[string]json.RawMessage, name, where string) string {
	raw, ok := obj[name]
	if !ok || isNull(raw) {
		defects.add("%s: %s is missing", where, name)
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		defects.add("%s: %s is not a string", where, name)
		return ""
	}
	if strings.TrimSpace(s) == "" {
		defects.add("%s: %s is empty", where, name)
	}
	return s
}

// optionalString reads a string member; what names it in a message.
func optionalString(defects *Defects, obj map[string]json.RawMessage, name, what string) string {
	raw, ok := obj[name]
	if !ok || isNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		defects.add("%s is not a string", what)
	}
	return s
}

func optionalBool(defects *Defects, obj map[string]json.RawMessage, name, where string) bool {
	raw, ok := obj[name]
	if !ok || isNull(raw) {
		return false
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		defects.add("%s: %s is not true or false", where, name)
	}
	return b
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonProblem words a JSON decoding error for a person.
func jsonProblem(err error) string {
	if err == nil {
		return "it is null"
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%s at byte %d", syn.Error(), syn.Offset)
	}
	return err.Error()
}

// Filled is the descriptor as servicegate serves it to the service: the
// document as written, with the fields the gateway knows and the
// descriptor leaves out filled in: baseUrl (from baseURL) and
// authentication.clientId (from clientID, with type service_app when the
// descriptor has no authentication). Members are written in sorted
// order.
func (d *Descriptor) Filled(baseURL, clientID string) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(d.raw)+1)
	for k, v := range d.raw {
		out[k] = v
	}
	if d.BaseURL == "" && baseURL != "" {
		out["baseUrl"], _ = json.Marshal(baseURL)
	}
	if d.ClientID == "" && clientID != "" {
		auth := map[string]json.RawMessage{}
		if a, ok := d.raw["authentication"]; ok {
			_ = json.Unmarshal(a, &auth)
		}
		if _, ok := auth["type"]; !ok {
			auth["type"], _ = json.Marshal(AuthenticationType)
		}
		auth["clientId"], _ = json.Marshal(clientID)
		out["authentication"], _ = json.Marshal(auth)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
