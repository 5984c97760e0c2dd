// Package installations keeps what the gateway learns when an organization
// installs an app: the organization (id and domain), its base address, the
// app id, the app secret the service gave for that installation, and the
// app token the service issues to the app for that organization. It has no
// Caddy import.
//
// A Book holds the installations: sealed (AES-256-GCM, each record bound
// to its organization) in a Store that outlives the process (a bbolt file,
// or Redis in package cluster), and a small local copy that answers the
// hot paths (the secret that verifies a webhook delivery, the app token
// put on a forwarded request) without a call to the store.
//
// A Handler answers the service's lifecycle calls (installed, uninstall,
// subscription_paid): it proves an installation by asking the service for
// an app token with its secret before storing anything, compares the
// secret of an uninstall in constant time, and tells the app of each event
// without the secrets.
package installations
