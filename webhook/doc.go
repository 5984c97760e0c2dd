// Package webhook checks inbound event deliveries of the service before an
// app sees them: the signature over the raw body (with package signature),
// the secrets of the organization that sent it, its organization headers,
// its module key and the names of its events. It has no Caddy import.
//
// A Checker holds the configuration. CheckHeaders decides from the headers
// alone (a delivery that cannot pass is refused before its body is read);
// CheckBody decides once the body is in memory, and removes the
// organization header that the signature does not vouch for:
//
//	d, refusal := checker.CheckHeaders(r.Header)
//	if refusal != nil { … answer refusal.Status with refusal.Message … }
//	body := … read at most max_size bytes …
//	if refusal := checker.CheckBody(&d, r.Header, body); refusal != nil { … }
//
// Per-organization secrets come from a SecretsFile, which is re-read when
// it changes and keeps its last good contents when a new one is broken.
//
// A Handler is the whole request pipeline of service_webhook around a
// Checker: the size limit, the body read within it and a deadline, the
// checks, and the verified delivery handed to the app or to a queue, with
// refusals answered and reported through the callbacks of its
// HandlerConfig. A Go app can put one in front of its own handlers.
package webhook
