package caddymodule

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/servicegate/servicegate/internal/suggest"
)

// The Caddyfile parsing every servicegate directive shares, so that they
// all answer alike: one wording for an unknown sub-directive (with the
// known one it is a slip of), a repeat of a sub-directive that takes one
// value refused everywhere, Caddy's own argument-count error, one check
// of every address, and errors and warnings that name the file and line.

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
			return d.Errf("unrecognized %s sub-directive %q%s", what, name, didYouMean(name, subs))
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

// subdirectiveEdits is how many edits away from a known sub-directive an
// unknown one is taken for a slip of it.
const subdirectiveEdits = 2

// didYouMean is "; did you mean …?" naming the sub-directive of subs that
// name is a slip of, or "" when none is near.
func didYouMean(name string, subs map[string]subdirective) string {
	if near := suggest.Nearest(name, slices.Sorted(maps.Keys(subs)), subdirectiveEdits); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
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

// addressForm is what a setting that takes an address accepts: an http(s)
// URL with a host, and for some also a path or a file, or only part of a
// URL.
type addressForm int

const (
	// anyURL is an http(s) URL: scheme, host, path and query.
	anyURL addressForm = iota
	// baseURL is an http(s) URL without a query: the base the gateway
	// adds paths to (the service, the app's public address).
	baseURL
	// originURL is scheme, host and port, without a path (the app a
	// webhook queue delivers to, with each delivery's own path).
	originURL
	// pathOrURL is a path on the site, starting with /, or an anyURL.
	pathOrURL
	// fileOrURL is a file, or an anyURL: a value with a scheme, or one
	// that starts with a host and port, is an address.
	fileOrURL
)

// hostAndPort is the start of an address written without its scheme.
var hostAndPort = regexp.MustCompile(`^[A-Za-z0-9.\[\]:-]*:[0-9]+(/|$)`)

// checkAddress is the one check of every setting that takes an address:
// at its line when the Caddyfile is adapted (urlArg), and on the value a
// handler resolves when it loads (resolvedAddress). What a placeholder
// stands for is known only then: a value that starts with one is left to
// that check (or, for a placeholder of the request, to each request);
// one with a placeholder further on must still start with http:// or
// https://. Errors quote the value without the user name and password
// it may hold.
func checkAddress(name, value string, form addressForm) error {
	if value == "" || strings.HasPrefix(value, "{") || (form == pathOrURL && strings.HasPrefix(value, "/")) {
		return nil
	}
	literal, _, placeholders := strings.Cut(value, "{")
	shown := strconv.Quote(withoutUserInfo(value))
	scheme, _, ok := strings.Cut(literal, "://")
	switch {
	case !ok && form == fileOrURL && !hostAndPort.MatchString(literal):
		return nil // a file
	case !ok && form == pathOrURL:
		return fmt.Errorf("%s %s is neither a path starting with / nor an http(s) URL", name, shown)
	case !ok:
		return fmt.Errorf("%s %s has no scheme: write http://%s (or https://)", name, shown, withoutUserInfo(value))
	case !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https"):
		return fmt.Errorf("%s %s is not an http(s) URL (its scheme is %s)", name, shown, strconv.Quote(scheme))
	case placeholders:
		return nil
	}
	u, err := url.Parse(value)
	if err != nil {
		// url.Error repeats the whole value, user info included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s is not a URL: %v", name, shown, err)
	}
	host := u.Hostname()
	switch {
	case u.User != nil:
		return fmt.Errorf("%s %s holds a user name or password: an address of the service or the app takes none", name, shown)
	case host == "":
		return fmt.Errorf("%s %s has no host", name, shown)
	case strings.HasPrefix(host, ".") || strings.Contains(host, ".."):
		return fmt.Errorf("%s %s: host %q has an empty label", name, shown, host)
	case u.Fragment != "" || strings.HasSuffix(value, "#"):
		return fmt.Errorf("%s %s holds a fragment (#…), which is never sent", name, shown)
	case form == baseURL && strings.Contains(value, "?"):
		return fmt.Errorf("%s %s holds a query: it is a base that paths are added to", name, shown)
	case form == originURL && (strings.Trim(u.Path, "/") != "" || strings.Contains(value, "?")):
		return fmt.Errorf("%s %s is not scheme, host and port alone, such as http://127.0.0.1:3000", name, shown)
	}
	return nil
}

// withoutUserInfo is address with any user name and password left out.
func withoutUserInfo(address string) string {
	start := 0
	if i := strings.Index(address, "://"); i >= 0 {
		start = i + 3
	}
	end := len(address)
	if i := strings.IndexAny(address[start:], "/?#"); i >= 0 {
		end = start + i
	}
	if at := strings.LastIndexByte(address[start:end], '@'); at >= 0 {
		return address[:start] + "…@" + address[start+at+1:]
	}
	return address
}

// resolvedAddress is the configured address with its placeholders of
// the environment and files resolved, checked as the Caddyfile's is. A
// placeholder of the request stays, for the handler to resolve.
func resolvedAddress(name, configured string, form addressForm) (string, error) {
	v := caddy.NewReplacer().ReplaceKnown(configured, "")
	if v != configured {
		name += " " + configured
	}
	return v, checkAddress(name, v, form)
}

// urlArg is a sub-directive whose one address is stored in *dst, checked
// (checkAddress) at its line; urlArgs one whose addresses add to *dst.
func urlArg(dst *string, form addressForm) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) error {
		name := d.Val()
		v, err := oneArg(d)
		if err != nil {
			return err
		}
		if err := checkAddress(name, v, form); err != nil {
			return d.Err(err.Error())
		}
		*dst = v
		return nil
	}
}

func urlArgs(dst *[]string, form addressForm) func(d *caddyfile.Dispenser) error {
	return func(d *caddyfile.Dispenser) error {
		name := d.Val()
		args, err := someArgs(d)
		if err != nil {
			return err
		}
		for _, v := range args {
			if err := checkAddress(name, v, form); err != nil {
				return d.Err(err.Error())
			}
		}
		*dst = append(*dst, args...)
		return nil
	}
}
