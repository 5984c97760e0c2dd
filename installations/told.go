package installations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// told is the body the app is told of a lifecycle call. The gateway writes
// it from what the service proved and the gateway stored, never from the
// caller's bytes: the app reads the organization the service vouched for,
// whatever the call named. Ids are JSON numbers, as the service sends
// them; members without a value are left out.
//
//	installed:         event, appId, clientId, organizationId, domain, baseUrl, userId, installedAt
//	uninstall:         event, appId, clientId, organizationId, domain, baseUrl
//	subscription_paid: event, appId, clientId, organizationId, domain, baseUrl, expires
func told(kind Kind, clientID string, in *Installation, expires time.Time) []byte {
	var b bytes.Buffer
	b.WriteString(`{"event":`)
	writeString(&b, kind.String())
	member(&b, "appId", in.AppID, false)
	member(&b, "clientId", clientID, false)
	member(&b, "organizationId", in.OrganizationID, true)
	if in.Domain != "" {
		member(&b, "domain", in.Domain, false)
	} else {
		b.WriteString(`,"domain":null`)
	}
	member(&b, "baseUrl", in.BaseURL, false)
	switch kind {
	case Installed:
		member(&b, "userId", in.UserID, true)
		member(&b, "installedAt", in.InstalledAt.UTC().Format(time.RFC3339), false)
	case SubscriptionPaid:
		if !expires.IsZero() {
			member(&b, "expires", expires.UTC().Format(time.RFC3339), false)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// member writes ,"name":value when value is not empty: a number when id
// and value is a decimal integer, else a string.
func member(b *bytes.Buffer, name, value string, id bool) {
	if value == "" {
		return
	}
	b.WriteString(`,"` + name + `":`)
	if _, err := strconv.ParseInt(value, 10, 64); id && err == nil {
		b.WriteString(value)
		return
	}
	writeString(b, value)
}

func writeString(b *bytes.Buffer, s string) {
	out, _ := json.Marshal(s) // a string always encodes
	b.Write(out)
}

// ackWriter passes the app's answer to a lifecycle call on, and commits
// what the call changes when the app acknowledged it (a final 2xx), before
// the status goes out: the service is answered 2xx only once the change
// is stored, and a call the app did not acknowledge changes nothing, so
// that the service's retry finds the state it left. An informational
// status (1xx, 101 included) is not passed on and decides nothing: the
// service asked for no upgrade and waits for a final answer. When the
// commit fails, the app's answer is dropped and failed holds the error,
// for the caller to answer instead. It offers no Hijack: a lifecycle call
// is never switched to another protocol.
type ackWriter struct {
	http.ResponseWriter
	commit        func() error
	decided       bool
	code          int
	informational int // the last 1xx status the app answered, if any
	failed        error
}

// status is the status the app answered.
func (a *ackWriter) status() int { return a.code }

func (a *ackWriter) WriteHeader(status int) {
	if a.decided {
		return
	}
	if status >= 100 && status < 200 {
		a.informational = status
		return
	}
	a.decided, a.code = true, status
	if status >= 200 && status < 300 && a.commit != nil {
		if a.failed = a.commit(); a.failed != nil {
			return
		}
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *ackWriter) Write(p []byte) (int, error) {
	if !a.decided {
		a.WriteHeader(http.StatusOK)
	}
	if a.failed != nil {
		return len(p), nil
	}
	return a.ResponseWriter.Write(p)
}

// Flush sends what was written; before a final status it does nothing, so
// that only a status the app wrote decides.
func (a *ackWriter) Flush() {
	if a.decided && a.failed == nil {
		_ = http.NewResponseController(a.ResponseWriter).Flush()
	}
}

// errNoFinalStatus is what Report is told of a lifecycle call the app
// answered with no final status.
var errNoFinalStatus = errors.New("the app answered no final status")

// noFinalStatusMessage is the refusal of a lifecycle call the app answered
// with no final status: at most an informational one (the last, when the
// proxy passed it on).
func noFinalStatusMessage(kind Kind, informational int) string {
	why := "it answered with no final status (an informational answer such as 101 Switching Protocols, or nothing at all)"
	if informational != 0 {
		why = fmt.Sprintf("it answered only %d %s, an informational status", informational, http.StatusText(informational))
	}
	return fmt.Sprintf("The app did not acknowledge the %s call: %s. Nothing was changed; the service may send the call again.", kind, why)
}

// NoAnswer is the error of a lifecycle call the app gave no answer to: Err,
// what the next handler returned (a proxy's error, such as a connection
// refused or closed without an answer). Nothing was changed. Message says
// so to the person who reads the refusal; Err is for logs.
type NoAnswer struct {
	// Kind is the call.
	Kind Kind
	// Err is the next handler's error.
	Err error
}

func (e *NoAnswer) Error() string {
	return fmt.Sprintf("the app gave no answer to the %s call: %v", e.Kind, e.Err)
}

// Unwrap is the next handler's error.
func (e *NoAnswer) Unwrap() error { return e.Err }

// Message is the refusal of the call, for a person: the app's failure,
// and that nothing was changed.
func (e *NoAnswer) Message() string {
	cause := "no answer came"
	switch {
	case errors.Is(e.Err, io.EOF) || errors.Is(e.Err, io.ErrUnexpectedEOF):
		cause = "it closed the connection without an answer"
	case errors.Is(e.Err, context.DeadlineExceeded):
		cause = "no answer came in time"
	}
	return fmt.Sprintf("The app did not acknowledge the %s call: %s. Nothing was changed; the service may send the call again.", e.Kind, cause)
}
