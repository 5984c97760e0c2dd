// Package respond writes what servicegate answers a client itself: JSON
// refusals of the shape {"error":{"message":…}} that the service shows to
// its users, small HTML pages for people in a browser, and the choice
// between the two from the request's Accept header.
//
// Every handler of servicegate answers through this package, so a refusal
// reads, and a page is protected, the same way wherever it comes from. The
// package knows nothing of Caddy.
package respond
