package emulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// mask shows at most the last 4 characters of a secret, and none of a
// short one.
func mask(secret string) string {
	if secret == "" {
		return ""
	}
	r := []rune(secret)
	if len(r) < 12 {
		return "••••"
	}
	return "••••" + string(r[len(r)-4:])
}

// secretHeaders are the headers whose values are masked, and
// schemeHeaders those whose value starts with a scheme kept in clear.
var (
	secretHeaders = map[string]bool{
		"X-Service-Signature": true, "X-Service-App-Token": true, "Cookie": true, "Set-Cookie": true,
	}
	schemeHeaders = map[string]bool{"Authorization": true, "Proxy-Authorization": true, "Www-Authenticate": false}
)

// maskHeader is h with its secrets masked, and the URLs of Location
// headers with their secret parameters masked.
func maskHeader(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for name, values := range h {
		masked := make([]string, len(values))
		for i, v := range values {
			switch {
			case secretHeaders[name]:
				v = mask(v)
			case schemeHeaders[name]:
				if scheme, rest, ok := strings.Cut(v, " "); ok {
					v = scheme + " " + mask(rest)
				} else {
					v = mask(v)
				}
			case name == "Location":
				v = maskURL(v)
			}
			masked[i] = v
		}
		out[name] = masked
	}
	return out
}

// secretParams are the query and form parameters whose values are masked.
var secretParams = map[string]bool{
	"client_secret": true, "app_secret": true, "code": true, "refresh_token": true, "access_token": true,
	"id_token": true, "password": true, "token": true, "jwttoken": true, "sig": true, "secret": true,
}

// maskURL masks the secret parameters of an address's query.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return raw
	}
	u.RawQuery = maskForm(u.RawQuery)
	return u.String()
}

// maskForm masks the secret parameters of a form or query, keeping the
// others as they are.
func maskForm(form string) string {
	parts := strings.Split(form, "&")
	for i, p := range parts {
		name, value, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		n, err := url.QueryUnescape(name)
		if err != nil || !secretParams[strings.ToLower(n)] {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			v = value
		}
		parts[i] = name + "=" + url.QueryEscape(mask(v))
	}
	return strings.Join(parts, "&")
}

// secretMembers matches the JSON members whose string values are masked,
// in whole or cut bodies alike.
var secretMembers = regexp.MustCompile(`(?i)("(?:client_secret|app_secret|appSecret|access_token|refresh_token|id_token|code|password|token|secret|app_token)"\s*:\s*)"((?:[^"\\]|\\.)*)"`)

// maskedBody is a body as the console shows it: secrets masked, JSON
// pretty-printed, invalid UTF-8 replaced. isJSON says it was JSON.
func maskedBody(b []byte, contentType string) (text string, isJSON bool) {
	if len(b) == 0 {
		return "", false
	}
	if strings.HasPrefix(contentType, "application/x-www-form-urlencoded") {
		return maskForm(string(b)), false
	}
	masked := secretMembers.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := secretMembers.FindSubmatch(m)
		var value string
		if json.Unmarshal(append(append([]byte{'"'}, sub[2]...), '"'), &value) != nil {
			value = string(sub[2])
		}
		quoted, _ := json.Marshal(mask(value))
		return append(append([]byte(nil), sub[1]...), quoted...)
	})
	if json.Valid(masked) {
		var out bytes.Buffer
		if json.Indent(&out, masked, "", "  ") == nil {
			return out.String(), true
		}
	}
	if !utf8.Valid(masked) {
		return strings.ToValidUTF8(string(masked), "\uFFFD"), false
	}
	return string(masked), false
}
