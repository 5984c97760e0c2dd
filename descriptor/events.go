package descriptor

import (
	"encoding/json"
	"sort"

	"github.com/servicegate/servicegate/internal/suggest"
	"github.com/servicegate/servicegate/urlpath"
)

// The lifecycle events a descriptor may name under "events".
const (
	EventInstalled        = "installed"
	EventUninstall        = "uninstall"
	EventSubscriptionPaid = "subscription_paid"
)

// Events are the paths, relative to the app's base address, where the
// service makes its lifecycle calls; an empty path is an event the app
// does not declare.
type Events struct {
	Installed, Uninstall, SubscriptionPaid string
}

// Any reports whether the descriptor declares a lifecycle event.
func (e Events) Any() bool {
	return e.Installed != "" || e.Uninstall != "" || e.SubscriptionPaid != ""
}

// parseEvents reads "events": an object of event names and paths, each a
// path the gateway can route that no module uses.
func (d *Descriptor) parseEvents(defects *Defects, data json.RawMessage) {
	if isNull(data) {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil || obj == nil {
		defects.add("events is not an object of lifecycle events and their paths, such as {\"installed\": \"/installed\"}")
		return
	}
	dst := map[string]*string{EventInstalled: &d.Events.Installed, EventUninstall: &d.Events.Uninstall,
		EventSubscriptionPaid: &d.Events.SubscriptionPaid}
	modules := map[string]string{}
	for _, m := range d.Modules() {
		modules[urlpath.Canonical(m.Path())] = m.Key
	}
	seen := map[string]string{}
	for _, name := range sortedKeys(obj) {
		where := "events." + name
		p, ok := dst[name]
		if !ok {
			known := make([]string, 0, len(dst))
			for k := range dst {
				known = append(known, k)
			}
			sort.Strings(known)
			if near := suggest.Nearest(name, known, 2); near != "" {
				defects.add("%s is not a lifecycle event of the service; did you mean %q?", where, near)
				continue
			}
			defects.add("%s is not a lifecycle event of the service (those are %v)", where, known)
			continue
		}
		u := requiredString(defects, obj, name, "events")
		if u == "" {
			continue
		}
		if problem := urlProblem(u); problem != "" {
			defects.add("%s: path %q %s", where, u, problem)
			continue
		}
		path := Module{URL: u}.Path()
		// Paths that differ only in case or a trailing slash are one path
		// to the app, as module urls are.
		same := urlpath.Canonical(path)
		if key, ok := modules[same]; ok {
			defects.add("%s: path %q is also the url of module %q", where, u, key)
			continue
		}
		if other, ok := seen[same]; ok {
			defects.add("%s: path %q is also the path of events.%s", where, u, other)
			continue
		}
		seen[same] = name
		*p = path
	}
}
