// Package cli is what servicegate's subcommands do (caddy service-token,
// service-webhook, service-app): mint a token, sign and send a delivery,
// check a descriptor, call an app's modules or the emulator's lifecycle
// endpoints, each printing plain text on an io.Writer. Each command takes
// a plain options struct, its flags already read; registering the
// commands and reading their flags is the Caddy glue's.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// The demo configuration's values, the defaults of the commands.
const (
	DemoClientSecret = "demo-client-secret"
	DemoAppSecret    = "demo-app-secret"
	DemoDomain       = "acme.example"
	DemoClientID     = "demo-client"
	// DemoEmulator is the emulator's address in Caddyfile.example.
	DemoEmulator = "http://localhost:8081"
)

// PrintToken mints an access token shaped like the service's, signed with
// secret, and prints it (and nothing else) on out.
func PrintToken(out io.Writer, secret string, t emulator.Token) error {
	token, err := emulator.MintToken(secret, t)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, token)
	return err
}

// Secret is the secret a command signs with: value (--secret), or the
// environment variable named env (--secret-env). valueGiven says value
// was given rather than left at its default: giving both is refused.
func Secret(value, env string, valueGiven bool) (string, error) {
	if env == "" {
		if value == "" {
			return "", errors.New("the secret is empty")
		}
		return value, nil
	}
	if valueGiven {
		return "", errors.New("give --secret or --secret-env, not both")
	}
	secret := os.Getenv(env)
	if secret == "" {
		return "", fmt.Errorf("the environment variable %s is empty or not set", env)
	}
	return secret, nil
}

// LoadDescriptor reads a descriptor from a file or an address, with no
// kept copy: a command says what the app serves now.
func LoadDescriptor(source string) (*descriptor.Descriptor, error) {
	l, err := (&descriptor.Loader{}).Load(context.Background(), source)
	if err != nil {
		return nil, err
	}
	return l.Descriptor, nil
}

// answerSummary is the start of an answer, on one line.
func answerSummary(body []byte) string {
	const max = 120
	s := []rune(strings.TrimSpace(string(body)))
	for i, r := range s {
		if r == '\n' || r == '\r' {
			s[i] = ' '
		}
	}
	if len(s) > max {
		return string(s[:max]) + "…"
	}
	return string(s)
}
