package approute

import (
	"errors"
	"testing"
)

func TestUnreachableMessage(t *testing.T) {
	for _, c := range []struct {
		address, err, want string
	}{
		{"127.0.0.1:3000", "dial tcp 127.0.0.1:3000: connect: connection refused", "The app at 127.0.0.1:3000 could not be reached: connection refused."},
		{"10.0.0.1:80", "dial tcp 10.0.0.1:80: i/o timeout", "The app at 10.0.0.1:80 could not be reached: timeout."},
		{"/run/app.sock", "dial unix /run/app.sock: connect: no such file or directory", "The app at /run/app.sock could not be reached: no such file or directory."},
		{"", "refused", "The app could not be reached: refused."},
	} {
		if got := UnreachableMessage(c.address, errors.New(c.err)); got != c.want {
			t.Errorf("%q: %q, want %q", c.err, got, c.want)
		}
	}
}
