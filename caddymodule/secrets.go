package caddymodule

import (
	"errors"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
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
// *dst; secretArgs one whose values add to *dst. An {env.NAME} in them
// that is not set is warned about.
func secretArg(directive string, dst *string) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		at := d.Token()
		if *dst, err = oneArg(d); err == nil {
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
		warnUnsetEnv(at, directive, args...)
		return err
	}
}
