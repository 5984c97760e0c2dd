package caddymodule

import (
	"errors"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/installations"
)

// Secrets are written as {env.NAME} or {file./path} placeholders, resolved
// when the config loads. A variable that is not set resolves to nothing,
// and the config cannot load: these helpers name the variable, at the
// file and line of the Caddyfile when it is adapted, and in the error
// when it loads.

// envPlaceholder is an {env.NAME} placeholder.
var envPlaceholder = regexp.MustCompile(`\{env\.([^{}]+)\}`)

// unsetEnv lists the variables named by {env.NAME} placeholders in value
// that are not set, or set to nothing, in this process's environment.
func unsetEnv(value string) []string {
	var names []string
	for _, m := range envPlaceholder.FindAllStringSubmatch(value, -1) {
		if os.Getenv(m[1]) == "" {
			names = append(names, m[1])
		}
	}
	return names
}

// resolveSecret resolves the placeholders of a configured secret. An empty
// result is an error naming what gave nothing: the configured value holds
// only placeholders then (a literal would have resolved to itself), so
// quoting it quotes no secret.
func resolveSecret(what, value string) (string, error) {
	secret := caddy.NewReplacer().ReplaceKnown(value, "")
	if secret != "" {
		return secret, nil
	}
	if value == "" {
		return "", errors.New(what + " is empty")
	}
	msg := what + " " + value + " is empty once its placeholders are resolved"
	if names := unsetEnv(value); len(names) > 0 {
		msg += ": the environment variable " + strings.Join(names, " and ") + " is not set, or set to nothing"
	} else if strings.Contains(value, "{file.") {
		msg += ": the file is empty or cannot be read"
	}
	return "", errors.New(msg)
}

// warnUnsetEnv logs, with the Caddyfile's file and line, each variable a
// secret names that is not set where the Caddyfile is adapted; at is the
// sub-directive's name. A warning, not an error: a Caddyfile may be
// adapted where the secrets are not (CI, `caddy adapt`) and loaded where
// they are; `caddy run` adapts and loads in one process, so the warning
// comes just before the error of the load.
func warnUnsetEnv(at caddyfile.Token, directive string, values ...string) {
	for _, value := range values {
		names := unsetEnv(value)
		if len(names) == 0 {
			continue
		}
		caddy.Log().Warn(directive+" "+at.Text+" "+value+": the environment variable "+strings.Join(names, " and ")+
			" is not set here; the config does not load where it is not set",
			zap.String("file", at.File), zap.Int("line", at.Line))
	}
}

// secretArg is a sub-directive whose one value, a secret, is stored in
// *dst; secretArgs one whose values add to *dst. A secret written into the
// Caddyfile, and an {env.NAME} in it that is not set, are warned about.
func secretArg(directive string, dst *string) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		at := d.Token()
		if *dst, err = oneArg(d); err == nil {
			warnWrittenSecret(d, at, directive, at.Text, *dst)
			warnUnsetEnv(at, directive, *dst)
		}
		return err
	}
}

func secretArgs(directive string, dst *[]string) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) error {
		at := d.Token()
		args, err := someArgs(d)
		*dst = append(*dst, args...)
		warnWrittenSecret(d, at, directive, at.Text, args...)
		warnUnsetEnv(at, directive, args...)
		return err
	}
}

// loadPlaceholder is a placeholder resolved when the config loads, from
// the environment or a file.
var loadPlaceholder = regexp.MustCompile(`\{(env|file)\.[^{}]+\}`)

// writtenSecret tells whether a configured secret holds more than
// placeholders resolved when the config loads: a literal, or a {$NAME}
// that the Caddyfile adapter has already replaced with its value.
func writtenSecret(value string) bool {
	return loadPlaceholder.ReplaceAllString(value, "") != ""
}

// writtenSecretWarning says where a secret written into the Caddyfile
// will show. The adapted config is JSON that Caddy keeps and shows whole.
const writtenSecretWarning = " is written into the Caddyfile (as it stands, or through {$NAME}, which is replaced when the Caddyfile is read): " +
	"the secret will stand in the saved config (autosave.json), in the admin API's GET /config/ and in Caddy's DEBUG log line of the adjusted config; " +
	"write {env.NAME} or {file.PATH} instead, resolved when the config loads"

// warnWrittenSecret warns, at the file and line of at, when one of the
// values of the secret, named what, is written into the Caddyfile.
func warnWrittenSecret(d *caddyfile.Dispenser, at caddyfile.Token, directive, what string, values ...string) {
	for _, v := range values {
		if writtenSecret(v) {
			adaptWarn(d, at, directive, what+writtenSecretWarning)
			return
		}
	}
}

// installationsKeyArg is the installations block's key, a secret. Written
// into the Caddyfile, its length is checked at its line; the value of a
// placeholder is checked when the config loads.
func installationsKeyArg(dst *string) func(d *caddyfile.Dispenser) error {
	read := secretArg("service_app installations", dst)
	return func(d *caddyfile.Dispenser) error {
		if err := read(d); err != nil {
			return err
		}
		if n := len(*dst); !strings.Contains(*dst, "{") && n < installations.MinKeyLength {
			return d.Errf("installations: key is %d bytes, and sealing what is stored takes at least %d: "+
				"write {env.SERVICEGATE_INSTALLATIONS_KEY}, set to a random key (openssl rand -base64 32)", n, installations.MinKeyLength)
		}
		return nil
	}
}
