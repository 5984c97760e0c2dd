// Package fault holds servicegate's load-and-fault suite: tests that drive
// the built Caddy binary as a subprocess on 127.0.0.1 while the service
// goes down, answers slowly, or sees thousands of organizations, while
// clients crawl, the app hangs up mid-answer, and the config is reloaded;
// and while clients promise large bodies and send one byte of them (Caddy's
// memory must grow with the bytes received, not the bytes promised).
//
// The tests are behind the build tag fault, so `go test ./...` skips them:
//
//	go test -tags fault -short ./bench/fault/   # about two minutes
//	go test -tags fault -v ./bench/fault/       # the longer loads
//
// They build ./cmd/caddy into a temporary directory first, or use the
// binary named by SERVICEGATE_CADDY. They listen on 127.0.0.1 ports
// 18600-18699 only; the upstream apps are httptest servers on random
// loopback ports.
package fault
