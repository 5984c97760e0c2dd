package webhook

import (
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/servicegate/servicegate/signature"
)

// The headers of a delivery, in canonical form so that they are looked up
// in the header map directly.
const (
	HeaderSignature = "X-Service-Signature"
	HeaderDomain    = "X-Service-Domain"
	HeaderOrgID     = "X-Service-Id"
	HeaderModuleKey = "X-Module-Key"
)

// Checker checks deliveries. Its fields are set before the first check
// and not changed after; a Checker is then safe for concurrent use.
//
// Order of checks: signature (401), organization headers and module key
// (403), body shape (400) and events (403). The signature comes before
// the allow-lists, so a caller without a secret learns nothing about them.
type Checker struct {
	// AppWide verifies the deliveries of organizations that File does not
	// list; nil when there are no app-wide secrets.
	AppWide *signature.Verifier
	// File holds per-organization secrets; nil when there is none.
	File *SecretsFile
	// Installations, when set, holds the secrets of the organizations
	// that installed the app: an organization with one is checked
	// against its secret only, before File and AppWide; a delivery no
	// secret applies to is refused as not installed.
	Installations Installations
	// ModuleKeys, when set, are the X-Module-Key values allowed.
	ModuleKeys []string
	// Events, when set, is the allow-list of event names.
	Events *Events
}

// Reason is why a delivery was refused.
type Reason int

// The reasons of refusals.
const (
	ReasonMissingSignature Reason = iota + 1 // 401: no X-Service-Signature
	ReasonBadSignature                       // 401: malformed, repeated, or matching no secret
	ReasonForbidden                          // 403: organization headers, module key or event
	ReasonBadBody                            // 400: not a delivery while events are checked
	ReasonTooLarge                           // 413: over a Handler's MaxSize
	ReasonSlowBody                           // 408: the body did not arrive within a Handler's ReadTimeout
	ReasonUnreadable                         // 400: the body could not be read in full
	ReasonUnavailable                        // 503: the organization's installation cannot be read now
)

// Refusal is a refused delivery: the status to answer and a message for
// the person who reads it. The message never holds a header value, the
// body or a secret.
type Refusal struct {
	Status  int
	Reason  Reason
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// The refusals, made once so that refusing costs no allocation.
var (
	refuseNoSignature    = &Refusal{http.StatusUnauthorized, ReasonMissingSignature, "The delivery is not signed: its X-Service-Signature header is missing."}
	refuseEmptySignature = &Refusal{http.StatusUnauthorized, ReasonMissingSignature, "The delivery is not signed: its X-Service-Signature header is empty."}
	refuseBadSignature   = &Refusal{http.StatusUnauthorized, ReasonBadSignature, "The X-Service-Signature of the delivery is not an HMAC-SHA256 in hex or base64."}
	refuseTwoSignatures  = &Refusal{http.StatusUnauthorized, ReasonBadSignature, "The delivery carries more than one X-Service-Signature header."}
	refuseTwoOrgs        = &Refusal{http.StatusUnauthorized, ReasonBadSignature, "The delivery names more than one organization (X-Service-Domain or X-Service-Id repeated)."}
	refuseMismatch       = &Refusal{http.StatusUnauthorized, ReasonBadSignature, "The signature of the delivery does not match its body."}
	refuseOrgsDiffer     = &Refusal{http.StatusForbidden, ReasonForbidden, "The X-Service-Domain and X-Service-Id of the delivery name different organizations."}
	refuseModuleKey      = &Refusal{http.StatusForbidden, ReasonForbidden, "This endpoint does not accept deliveries for that webhook module (X-Module-Key)."}
	refuseEvent          = &Refusal{http.StatusForbidden, ReasonForbidden, "The delivery holds an event this endpoint does not accept."}
	refuseShape          = &Refusal{http.StatusBadRequest, ReasonBadBody, `The delivery is not JSON with an "events" list of objects that each name their "event".`}
	refuseTooDeep        = &Refusal{http.StatusBadRequest, ReasonBadBody, "The delivery is too deeply nested: this endpoint follows arrays and objects " + strconv.Itoa(MaxDepth) + " levels deep."}
	refuseKeyCase        = &Refusal{http.StatusBadRequest, ReasonBadBody, `The delivery has a key that differs from "events" or "event" only by case; the app's JSON library might read it instead, so it is refused.`}
	refuseDuplicateKey   = &Refusal{http.StatusBadRequest, ReasonBadBody, `The delivery repeats an "events" or "event" key; the app's JSON library might read the other one, so it is refused.`}
)

// Delivery is a delivery whose headers passed, waiting for its body.
type Delivery struct {
	mac      [sha256.Size]byte
	verifier *signature.Verifier
	// differ: the secrets file gives the domain and the id different
	// secrets. dropDomain, dropID: the header is not vouched for by the
	// secrets that verify the delivery.
	differ, dropDomain, dropID bool
	// stream, when Reader or Writer was used, holds the MACs computed as
	// the body arrived.
	stream *signature.Stream
}

// Reader returns the body src of a delivery whose headers passed, read
// through the MACs of its candidate secrets: the signature is computed as
// the bytes arrive, and CheckBody only compares. Release must follow when
// CheckBody is not called (the body could not be read).
func (d *Delivery) Reader(src io.Reader) io.Reader {
	d.stream = d.verifier.Stream()
	return d.stream.Reader(src)
}

// Writer returns the MACs of the candidate secrets of a delivery whose
// headers passed, for the body to be written to as it arrives (as
// limits.ReadAllTee does); then CheckBody only compares, as after Reader.
// Release must follow when CheckBody is not called.
func (d *Delivery) Writer() io.Writer {
	d.stream = d.verifier.Stream()
	return d.stream
}

// Release lets go of the MACs of Reader; CheckBody releases them itself.
func (d *Delivery) Release() {
	if d.stream != nil {
		d.stream.Release()
		d.stream = nil
	}
}

// verify checks the signature: against the MACs fed by Reader, or over
// body.
func (d *Delivery) verify(body []byte) error {
	if d.stream == nil {
		return d.verifier.VerifyMAC(body, d.mac[:])
	}
	err := d.stream.Verify(d.mac[:])
	d.Release()
	return err
}

// CheckHeaders checks what the headers alone can tell: a signature header
// that parses, one organization, and a secret that applies to it. A
// delivery that no secret could verify is refused here, before its body
// is read.
func (c *Checker) CheckHeaders(h http.Header) (Delivery, *Refusal) {
	var d Delivery
	switch sigs := h[HeaderSignature]; len(sigs) {
	case 0:
		return d, refuseNoSignature
	case 1:
		mac, err := signature.Parse(sigs[0])
		if err != nil {
			if errors.Is(err, signature.ErrMissing) {
				return d, refuseEmptySignature
			}
			return d, refuseBadSignature
		}
		copy(d.mac[:], mac)
	default:
		return d, refuseTwoSignatures
	}
	switch ok, unreadable := c.chooseSecrets(&d, h); {
	case !ok:
		return d, refuseTwoOrgs
	case unreadable:
		return d, refuseInstallationUnreadable
	}
	if d.verifier == nil {
		// No secret applies to this organization: nothing the body holds
		// could pass.
		if c.Installations != nil {
			return d, refuseNotInstalled
		}
		return d, refuseMismatch
	}
	return d, nil
}

// chooseSecrets chooses the verifier of the organization a delivery
// names: by X-Service-Domain when present, else by X-Service-Id; the
// app-wide secrets when the organization is not in the secrets file. It
// reports false when either header is repeated, since then it is not
// clear which organization signed, and unreadable when the organization
// has an installation that cannot be read (see chooseInstallation).
//
// It also decides what becomes of the organization headers. A header is
// vouched for by the signature when the secrets that verify it are the
// secrets of the organization the header names: those the file lists for
// it, or the app-wide ones for an organization it does not list. When the
// file lists both the domain and the id under different secrets, the
// delivery is refused; any other header not vouched for is removed before
// the app sees it.
func (c *Checker) chooseSecrets(d *Delivery, h http.Header) (ok, unreadable bool) {
	domains, ids := h[HeaderDomain], h[HeaderOrgID]
	if len(domains) > 1 || len(ids) > 1 {
		return false, false
	}
	if c.Installations != nil {
		if installed, unreadable := c.chooseInstallation(d, h); installed || unreadable {
			return true, unreadable
		}
	}
	if c.File == nil {
		d.verifier = c.AppWide
		return true, false
	}
	var domain, id string
	if len(domains) == 1 {
		domain = domains[0]
	}
	if len(ids) == 1 {
		id = ids[0]
	}
	orgs := *c.File.current.Load() // one version of the file for all look-ups
	var byDomain, byID *signature.Verifier
	if domain != "" {
		byDomain = orgs[domain]
	}
	if id != "" {
		byID = orgs[id]
	}
	switch {
	case domain != "":
		d.verifier = byDomain
	case id != "":
		d.verifier = byID
	}
	if d.verifier == nil {
		d.verifier = c.AppWide
	}
	d.differ = byDomain != nil && byID != nil && byDomain != byID
	vouched := func(v *signature.Verifier) bool {
		if v == nil {
			v = c.AppWide
		}
		return v == d.verifier
	}
	d.dropDomain = domain != "" && !vouched(byDomain)
	d.dropID = id != "" && !vouched(byID)
	return true, false
}

// CheckBody checks the body of a delivery that passed CheckHeaders (read
// through d.Reader, or not): the
// signature, the organization headers, the module key and the events.
// When it passes, the organization header the signature does not vouch
// for has been removed from h.
func (c *Checker) CheckBody(d *Delivery, h http.Header, body []byte) *Refusal {
	if d.verify(body) != nil {
		return refuseMismatch
	}
	if d.differ {
		return refuseOrgsDiffer
	}
	if len(c.ModuleKeys) > 0 {
		keys := h[HeaderModuleKey]
		if len(keys) != 1 || !slices.Contains(c.ModuleKeys, keys[0]) {
			return refuseModuleKey
		}
	}
	if c.Events != nil {
		switch err := c.Events.Check(body); err {
		case nil:
		case ErrEventNotAllowed:
			return refuseEvent
		case ErrTooDeep:
			return refuseTooDeep
		case ErrKeyCase:
			return refuseKeyCase
		case ErrDuplicateKey:
			return refuseDuplicateKey
		default:
			return refuseShape
		}
	}
	if d.dropDomain {
		delete(h, HeaderDomain)
	}
	if d.dropID {
		delete(h, HeaderOrgID)
	}
	return nil
}
