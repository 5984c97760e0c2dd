// Package subscription asks the service whether an organization has paid for
// an app, and caches the answers. It has no Caddy import.
//
// A Client makes one subscription query and turns the service's answer into
// an Answer: Active until a date (200), Unpaid with a subscribe link (402),
// NotFound (400 or 404) or Unauthorized (401). Anything else (no answer,
// 5xx, a body that cannot be read) is an error, never an answer.
//
// A Cache keeps answers per Key (base URL, app identifier, and the
// organization or a hash of the token), makes one query per key however many
// requests miss at once, and keeps lapsed positive answers around so that a
// caller may choose to trust them for a grace period while the service is
// unreachable.
//
// A Handler is the request pipeline of a subscription check: it looks the
// answer up (in the Cache, then in what other instances share, then with a
// query), lets the request through when the subscription is active, answers
// 401, 402 with the subscribe link, or 403 otherwise, and applies the
// OnError policy when the service cannot answer; refusals and reports go to
// callbacks of its HandlerConfig.
package subscription
