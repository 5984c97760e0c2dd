package installations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/servicegate/servicegate/jsonscan"
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

// Event is a lifecycle call as the service sent it. None of its fields is
// trusted until the service vouched for it (see Handler).
type Event struct {
	// Kind is the call.
	Kind Kind
	// The call's fields. Ids sent as JSON numbers are kept in decimal.
	AppID, AppSecret, ClientID, UserID, OrganizationID, Domain, BaseURL, Code string
}

// eventField is a member of a lifecycle call's body.
type eventField struct {
	name     string
	id       bool // a string or an integer
	required func(Kind) bool
	nullable bool
}

func always(Kind) bool          { return true }
func never(Kind) bool           { return false }
func notPaid(k Kind) bool       { return k != SubscriptionPaid }
func onlyInstalled(k Kind) bool { return k == Installed }
func (e *Event) dst(i int) *string {
	return [...]*string{&e.AppID, &e.OrganizationID, &e.Domain, &e.AppSecret, &e.ClientID, &e.BaseURL, &e.UserID, &e.Code}[i]
}

// eventFields are the members a lifecycle call may carry, in the order of
// Event.dst.
var eventFields = [...]eventField{
	{"appId", true, always, false},
	{"organizationId", true, always, false},
	{"domain", false, always, true}, // null in the standard edition
	{"appSecret", false, notPaid, false},
	{"clientId", false, notPaid, false},
	{"baseUrl", false, notPaid, false},
	{"userId", true, onlyInstalled, false},
	{"code", false, never, true},
}

// ParseEvent reads the body of a lifecycle call of kind: a JSON object
// with the fields the call carries. A key given twice, or one that
// differs from another key or from a field's name only by case, is
// refused, so that no two readers of the body can take different values
// from it; other members are ignored. The error says, for the person who
// reads it, which field is missing or wrong; it never quotes a value.
func ParseEvent(kind Kind, body []byte) (*Event, error) {
	if kind < 0 || kind >= NumKinds {
		return nil, fmt.Errorf("unknown lifecycle call %d", int(kind))
	}
	if len(body) > MaxEventBody {
		return nil, fmt.Errorf("the %s call's body is larger than 64 KiB", kind)
	}
	e := &Event{Kind: kind}
	var raws [len(eventFields)][]byte
	var seen []string
	var s jsonscan.Scanner
	s.Reset(body)
	var problem error
	err := s.Object(func(key []byte) error {
		k := string(key)
		for _, other := range seen {
			if other == k {
				problem = fmt.Errorf("the %s call's body names %s twice", kind, quoteKey(k))
				return problem
			}
			if strings.EqualFold(other, k) {
				problem = fmt.Errorf("the %s call's body has keys that differ only by case (%s)", kind, quoteKey(k))
				return problem
			}
		}
		seen = append(seen, k)
		for i, f := range eventFields {
			if f.name == k {
				v, err := s.Value()
				raws[i] = v
				return err
			}
			if strings.EqualFold(f.name, k) {
				problem = fmt.Errorf("the %s call's body has %s where %s is meant: keys differ by case", kind, quoteKey(k), f.name)
				return problem
			}
		}
		return s.Skip()
	})
	if problem != nil {
		return nil, problem
	}
	if err == nil {
		err = s.Finish()
	}
	if err != nil {
		return nil, fmt.Errorf("the %s call's body is not a JSON object", kind)
	}
	for i, f := range eventFields {
		raw := raws[i]
		if raw == nil {
			if f.required(kind) {
				return nil, fmt.Errorf("the %s call lacks %s", kind, f.name)
			}
			continue
		}
		v, err := readField(raw, f.id, f.nullable)
		if err != nil {
			return nil, fmt.Errorf("the %s call's %s %s", kind, f.name, err)
		}
		if v == "" && f.required(kind) && !f.nullable {
			return nil, fmt.Errorf("the %s call's %s is empty", kind, f.name)
		}
		*e.dst(i) = v
	}
	return e, nil
}

// quoteKey names a key of the body in an error: quoted, cut short, with
// anything but printable ASCII left out.
func quoteKey(k string) string {
	b := make([]byte, 0, 34)
	for i := 0; i < len(k) && len(b) < 32; i++ {
		if c := k[i]; c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b = append(b, c)
		}
	}
	return strconv.Quote(string(b))
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
