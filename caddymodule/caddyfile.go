package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// The Caddyfile parsing every servicegate directive shares, so that they
// all answer alike: one wording for an unknown sub-directive, a repeat of a
// sub-directive that takes one value refused everywhere, Caddy's own
// argument-count error, and errors that name the file and line.

// subdirective is one sub-directive of a directive's block.
type subdirective struct {
	// parse reads the sub-directive's arguments (and its own block, if it
	// has one); the dispenser is on the sub-directive's name.
	parse func(d *caddyfile.Dispenser) error
	// repeatable sub-directives may be given more than once; their values
	// add up. Any other is refused the second time.
	repeatable bool
}

// once is a sub-directive that may be given once; repeatable one that
// may be given more than once.
func once(parse func(d *caddyfile.Dispenser) error) subdirective {
	return subdirective{parse: parse}
}

func repeatable(parse func(d *caddyfile.Dispenser) error) subdirective {
	return subdirective{parse: parse, repeatable: true}
}

// otherSubdirective is the name, in a table, of the entry that reads every
// sub-directive the table does not name; without one, such a
// sub-directive is refused with the wording every directive shares.
const otherSubdirective = ""

// parseDirective reads "<directive> [{ <sub-directives> }]": no argument
// on the directive's line, then the block, each line by subs.
func parseDirective(d *caddyfile.Dispenser, subs map[string]subdirective) error {
	d.Next() // the directive name
	directive := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if err := parseBlock(d, directive, subs); err != nil {
		return err
	}
	if d.Next() {
		return d.Errf("%s: only one block is allowed", directive)
	}
	return nil
}

// parseBlock reads the block the dispenser is before, named what in
// messages: the directive, or a nested block such as the emulator's
// organization.
func parseBlock(d *caddyfile.Dispenser, what string, subs map[string]subdirective) error {
	seen := make(map[string]bool, len(subs))
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		sub, ok := subs[name]
		if !ok {
			if sub, ok = subs[otherSubdirective]; !ok {
				return d.Errf("unrecognized %s sub-directive %q", what, name)
			}
		}
		if seen[name] && !sub.repeatable {
			return d.Errf("%s: %s given more than once", what, name)
		}
		seen[name] = true
		if err := sub.parse(d); err != nil {
			return err
		}
	}
	return nil
}

// directiveErr is an error about the directive as a whole (a required
// sub-directive missing, two that exclude each other), named at the
// directive's own file and line; nil when err is.
func directiveErr(d *caddyfile.Dispenser, err error) error {
	if err == nil {
		return nil
	}
	d.Reset()
	d.Next()
	return d.Err(err.Error())
}

// The argument readers below each read the arguments of the sub-directive
// the dispenser is on, and refuse a wrong number of them with Caddy's
// argument-count error.

// noArg reads a sub-directive that takes no value.
func noArg(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// oneArg reads the sub-directive's one value.
func oneArg(d *caddyfile.Dispenser) (string, error) {
	var v string
	if !d.AllArgs(&v) {
		return "", d.ArgErr()
	}
	return v, nil
}

// stringArg is a sub-directive whose one value is stored in *dst.
func stringArg(dst *string) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = oneArg(d)
		return err
	}
}

// someArgs reads a sub-directive's values, at least one.
func someArgs(d *caddyfile.Dispenser) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	return args, nil
}

// appendArgs is a repeatable sub-directive whose values add to *dst.
func appendArgs(dst *[]string) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) error {
		args, err := someArgs(d)
		*dst = append(*dst, args...)
		return err
	}
}

// durationArg reads a duration as Caddy writes them (30s, 2m, 1d); zero is
// refused unless zeroAllowed, a negative duration always.
func durationArg(d *caddyfile.Dispenser, zeroAllowed bool) (caddy.Duration, error) {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(v)
	switch {
	case err != nil, dur < 0:
		if zeroAllowed {
			return 0, d.Errf("%s %q is not a duration of 0 or more", name, v)
		}
		return 0, d.Errf("%s %q is not a positive duration", name, v)
	case dur == 0 && !zeroAllowed:
		return 0, d.Errf("%s %q is not a positive duration", name, v)
	}
	return caddy.Duration(dur), nil
}

// durationTo is a sub-directive whose one positive duration is stored in
// *dst.
func durationTo(dst *caddy.Duration) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = durationArg(d, false)
		return err
	}
}

// zeroOrMoreDurationTo is a sub-directive whose one duration, zero
// allowed, is stored in *dst.
func zeroOrMoreDurationTo(dst *caddy.Duration) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = durationArg(d, true)
		return err
	}
}

// intArg reads a whole number of min or more.
func intArg(d *caddyfile.Dispenser, min int) (int, error) {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		if min == 1 {
			return 0, d.Errf("%s %q is not a positive integer", name, v)
		}
		return 0, d.Errf("%s %q is not a whole number of %d or more", name, v, min)
	}
	return n, nil
}

// intTo is a sub-directive whose one whole number of min or more is
// stored in *dst.
func intTo(dst *int, min int) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = intArg(d, min)
		return err
	}
}

// maxSize is the largest size a servicegate directive accepts: 1 TB as
// the service counts (1 KB = 1024 bytes), which limits.LimitName would write
// as 1024 GB.
const (
	maxSize     = 1 << 40
	maxSizeName = "1 TB"
)

// sizeArg reads a size as Caddy writes sizes: 5MiB, 500KB, 1048576;
// from 1 byte to 1 TB (1 TiB).
func sizeArg(d *caddyfile.Dispenser) (int64, error) {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return 0, err
	}
	size, err := humanize.ParseBytes(v)
	switch {
	case err != nil:
		return 0, d.Errf("%s %q is not a size (write 5MB, 500KB or 1048576)", name, v)
	case size == 0:
		return 0, d.Errf("%s must be more than zero bytes, got %q", name, v)
	case size > maxSize:
		return 0, d.Errf("%s %q is too large: at most %s", name, v, maxSizeName)
	}
	return int64(size), nil
}

// sizeTo is a sub-directive whose one size is stored in *dst.
func sizeTo(dst *int64) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = sizeArg(d)
		return err
	}
}

// onOffArg reads "on" or "off".
func onOffArg(d *caddyfile.Dispenser) (bool, error) {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return false, err
	}
	if v != "on" && v != "off" {
		return false, d.Errf("%s must be on or off, not %q", name, v)
	}
	return v == "on", nil
}

// onOffTo is a sub-directive whose "on" or "off" is stored in *dst.
func onOffTo(dst *bool) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) (err error) {
		*dst, err = onOffArg(d)
		return err
	}
}
