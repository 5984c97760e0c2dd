package caddymodule

import (
	"reflect"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.uber.org/zap"
)

// Warnings of the adapter: `caddy adapt` prints them, `caddy run` logs
// them, each with the file and line of what it concerns.

// adaptWarningsKey holds, in the dispenser of a servicegate directive,
// the adapter's list of warnings.
const adaptWarningsKey = "servicegate.adapt_warnings"

// adaptDispenser is the dispenser of h, set up so that the sub-directives
// it reads can add warnings to the adapter's (see adaptWarn).
func adaptDispenser(h httpcaddyfile.Helper) *caddyfile.Dispenser {
	if ws := helperWarnings(h); ws != nil {
		h.SetContext(adaptWarningsKey, ws)
	}
	return h.Dispenser
}

// nestedDispenser is a dispenser of seg, a block read apart from d's
// (service_app's nested blocks), whose warnings go where d's go.
func nestedDispenser(d *caddyfile.Dispenser, seg caddyfile.Segment) *caddyfile.Dispenser {
	nd := caddyfile.NewDispenser(seg)
	if ws := d.GetContext(adaptWarningsKey); ws != nil {
		nd.SetContext(adaptWarningsKey, ws)
	}
	return nd
}

// adaptWarn adds a warning about directive at the file and line of at to
// the adapter's warnings. Where the dispenser has none to add to (a global
// option, whose parser Caddy gives no way to warn), it is logged, with the
// file and line, which `caddy adapt` and `caddy run` print as well.
func adaptWarn(d *caddyfile.Dispenser, at caddyfile.Token, directive, msg string) {
	if ws, _ := d.GetContext(adaptWarningsKey).(*[]caddyconfig.Warning); ws != nil {
		*ws = append(*ws, caddyconfig.Warning{File: at.File, Line: at.Line, Directive: directive, Message: msg})
		return
	}
	caddy.Log().Warn(directive+": "+msg, zap.String("file", at.File), zap.Int("line", at.Line))
}

// addAdaptWarning adds w to the warnings the Caddyfile adapter returns,
// or logs it (see adaptWarn).
func addAdaptWarning(h httpcaddyfile.Helper, w caddyconfig.Warning) {
	if ws := helperWarnings(h); ws != nil {
		*ws = append(*ws, w)
		return
	}
	caddy.Log().Warn(w.Message, zap.String("file", w.File), zap.Int("line", w.Line))
}

// helperWarnings is the adapter's list of warnings, which httpcaddyfile
// keeps in an unexported field of the helper, with no method for a
// directive to add one; nil when Caddy changes that field.
func helperWarnings(h httpcaddyfile.Helper) *[]caddyconfig.Warning {
	f := reflect.ValueOf(&h).Elem().FieldByName("warnings")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*[]caddyconfig.Warning]() {
		return nil
	}
	return *(**[]caddyconfig.Warning)(unsafe.Pointer(f.UnsafeAddr()))
}
