package installations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is a lifecycle call of the service.
type Kind int

// The lifecycle calls, named as the descriptor's events names them.
const (
	// Installed: an organization installed the app.
	Installed Kind = iota
	// Uninstall: an organization removed the app.
	Uninstall
	// SubscriptionPaid: an organization paid for its subscription.
	SubscriptionPaid
	// NumKinds is the number of kinds, for arrays indexed by Kind.
	NumKinds
)

var kindNames = [NumKinds]string{Installed: "installed", Uninstall: "uninstall", SubscriptionPaid: "subscription_paid"}

// String is the kind's name in the descriptor's events.
func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return "event " + strconv.Itoa(int(k))
	}
	return kindNames[k]
}

// MaxEventBody caps the body of a lifecycle call; one is a few hundred
// bytes.
const MaxEventBody = 64 << 10

// maxField caps each field of a lifecycle call.
const maxField = 2048

// Event is a lifecycle call as the service sent it.
type Event struct {
	// Kind is the call.
	Kind Kind
	// The call's fields. Ids sent as JSON numbers are kept in decimal.
	AppID, AppSecret, ClientID, UserID, OrganizationID, Domain, BaseURL, Code string

	// fields are the body's members, for the copy the app is told.
	fields map[string]json.RawMessage
}

// ParseEvent reads the body of a lifecycle call of kind: a JSON object
// with the fields the call carries. The error says, for the person who
// reads it, which field is missing or wrong; it never quotes a value.
func ParseEvent(kind Kind, body []byte) (*Event, error) {
	if kind < 0 || kind >= NumKinds {
		return nil, fmt.Errorf("unknown lifecycle call %d", int(kind))
	}
	if len(body) > MaxEventBody {
		return nil, fmt.Errorf("the %s call's body is larger than 64 KiB", kind)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("the %s call's body is not a JSON object", kind)
	}
	e := &Event{Kind: kind, fields: fields}
	type field struct {
		name     string
		dst      *string
		id       bool // a string or an integer
		required bool
		nullable bool
	}
	all := []field{
		{"appId", &e.AppID, true, true, false},
		{"organizationId", &e.OrganizationID, true, true, false},
		{"domain", &e.Domain, false, true, true}, // null in the standard edition
		{"appSecret", &e.AppSecret, false, kind != SubscriptionPaid, false},
		{"clientId", &e.ClientID, false, kind != SubscriptionPaid, false},
		{"baseUrl", &e.BaseURL, false, kind != SubscriptionPaid, false},
		{"userId", &e.UserID, true, kind == Installed, false},
		{"code", &e.Code, false, false, true},
	}
	for _, f := range all {
		raw, ok := fields[f.name]
		if !ok {
			if f.required {
				return nil, fmt.Errorf("the %s call lacks %s", kind, f.name)
			}
			continue
		}
		v, err := readField(raw, f.id, f.nullable)
		if err != nil {
			return nil, fmt.Errorf("the %s call's %s %s", kind, f.name, err)
		}
		if v == "" && f.required && !f.nullable {
			return nil, fmt.Errorf("the %s call's %s is empty", kind, f.name)
		}
		*f.dst = v
	}
	return e, nil
}

// readField reads a JSON string (or, for an id, an integer; or null when
// nullable) of at most maxField bytes with no control characters.
func readField(raw json.RawMessage, id, nullable bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	if nullable && string(raw) == "null" {
		return "", nil
	}
	var s string
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("is not a valid string")
		}
	case id && len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return "", fmt.Errorf("is not an integer")
		}
		s = strconv.FormatInt(n, 10)
	case id:
		return "", fmt.Errorf("is neither a string nor an integer")
	default:
		return "", fmt.Errorf("is not a string")
	}
	if len(s) > maxField {
		return "", fmt.Errorf("is longer than %d bytes", maxField)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("is not valid UTF-8")
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("holds a control character")
		}
	}
	return s, nil
}

// Forwarded is the body the app is told: the call's members less
// appSecret and code, each member once.
func (e *Event) Forwarded() []byte {
	kept := make(map[string]json.RawMessage, len(e.fields))
	for k, v := range e.fields {
		if !strings.EqualFold(k, "appSecret") && !strings.EqualFold(k, "code") {
			kept[k] = v
		}
	}
	out, _ := json.Marshal(kept) // members that parsed marshal again
	return out
}
