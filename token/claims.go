package token

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Claims are the verified claims of a token, as decoded from its JSON:
// numbers are json.Number, objects map[string]any, arrays []any.
type Claims map[string]any

// Lookup returns the value at a dotted path such as "context.organization_id".
func (c Claims) Lookup(path string) (any, bool) {
	var cur any = map[string]any(c)
	for path != "" {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		var name string
		name, path, _ = strings.Cut(path, ".")
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// String returns the value at path rendered as text (see Render), and
// whether the path holds a value.
func (c Claims) String(path string) (string, bool) {
	v, ok := c.Lookup(path)
	if !ok || v == nil {
		return "", false
	}
	return Render(v), true
}

// Expiry returns the exp claim as a time, or the zero time when it is
// absent or not a number.
func (c Claims) Expiry() time.Time {
	n, ok := c["exp"].(json.Number)
	if !ok {
		return time.Time{}
	}
	if i, err := n.Int64(); err == nil {
		return time.Unix(i, 0)
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Render turns a claim value into text: strings as they are, numbers in
// their shortest form with integral values as integers ("42", never "42.0"
// or "4.2e+01"), booleans as true/false, arrays as their elements joined
// by commas, objects as compact JSON, null as "".
func Render(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return renderNumber(string(x))
	case float64:
		return renderFloat(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = Render(e)
		}
		return strings.Join(parts, ",")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func renderNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return renderFloat(f)
}

func renderFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
