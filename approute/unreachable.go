package approute

import "strings"

// UnreachableMessage is the message of a request whose app could not be
// reached: address, the app's host and port (or socket path) when it is
// known, and the cause, the end of err, the error of the connection to it
// ("dial tcp 127.0.0.1:3000: connect: connection refused" gives
// "connection refused", "… i/o timeout" gives "timeout"). address must
// never be a URL that may hold credentials.
func UnreachableMessage(address string, err error) string {
	cause := err.Error()
	if i := strings.LastIndex(cause, ": "); i >= 0 {
		cause = cause[i+2:]
	}
	if strings.HasSuffix(cause, "timeout") {
		cause = "timeout"
	}
	app := "The app"
	if address != "" {
		app += " at " + address
	}
	return app + " could not be reached: " + cause + "."
}
