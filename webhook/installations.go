package webhook

import (
	"net/http"

	"github.com/servicegate/servicegate/signature"
)

// Installations gives the secrets of the organizations that installed the
// app, each organization's own (package installations' Book is one).
type Installations interface {
	// Installation returns the verifier of the app secret of the
	// organization named by domain when it is not empty, else by id (a
	// domain is never looked up as an id, nor the reverse), with the
	// organization's id and domain, and whether it has an installation.
	Installation(domain, id string) (v *signature.Verifier, instID, instDomain string, ok bool)
}

// UnreadableInstallations is Installations that can tell an organization whose
// installation is stored but cannot be read (a damaged record, or one
// sealed under no configured key): its deliveries are refused for now
// (503), so that the service sends them again once it is repaired,
// rather than as not installed.
type UnreadableInstallations interface {
	Unreadable(domain, id string) bool
}

// refuseInstallationUnreadable is a delivery of an organization whose
// installation cannot be read.
var refuseInstallationUnreadable = &Refusal{http.StatusServiceUnavailable, ReasonUnavailable,
	"The installation of the organization of this delivery cannot be read by the gateway right now; send it again later."}

// refuseNotInstalled is a delivery of an organization with no
// installation, when no other secret applies to it.
var refuseNotInstalled = &Refusal{http.StatusForbidden, ReasonForbidden,
	"The app is not installed for the organization of this delivery (X-Service-Domain or X-Service-Id): it was never installed, or it was uninstalled."}

// chooseInstallation chooses the secret of the organization's
// installation and reports whether the delivery names an organization
// that has one: by X-Service-Domain, by X-Service-Id, or by both. An
// organization with an installation is verified with its installation's
// secret only, never the app-wide one: one found by either header is
// chosen, and a delivery whose other header names another organization
// is refused as naming two. One whose installation is stored but cannot be
// read is verified against nothing else: it is refused for now
// (unreadable), whatever the app-wide secrets say.
func (c *Checker) chooseInstallation(d *Delivery, h http.Header) (installed, unreadable bool) {
	var domain, id string
	if v := h[HeaderDomain]; len(v) == 1 {
		domain = v[0]
	}
	if v := h[HeaderOrgID]; len(v) == 1 {
		id = v[0]
	}
	if domain == "" && id == "" {
		return false, false
	}
	if u, ok := c.Installations.(UnreadableInstallations); ok && u.Unreadable(domain, id) {
		return false, true
	}
	v, instID, instDomain, ok := c.Installations.Installation(domain, "")
	if !ok {
		v, instID, instDomain, ok = c.Installations.Installation("", id)
	}
	if !ok {
		return false, false
	}
	d.verifier = v
	d.differ = (id != "" && id != instID) || (domain != "" && domain != instDomain)
	return true, false
}
