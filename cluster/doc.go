// Package cluster keeps what several servicegate instances share in Redis:
// one Client per Redis server and key prefix, with bounded calls, failures
// reported once in a while rather than per request, and a pub/sub listener
// that reconnects by itself; and, on top of it, the sharing of subscription
// answers (Subscriptions). It knows nothing of Caddy: a Go app can use it
// directly.
package cluster
