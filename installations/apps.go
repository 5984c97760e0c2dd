package installations

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// appsIndex is the file, beside the installations files of a directory,
// that names the app (client id) of each: a file's own name is a digest.
const appsIndex = "apps.json"

// indexed is what the index says of one installations file: its app (the
// client id), the app's descriptor identifier ("" in an index of an
// earlier version), and how many installations it held when that app last
// loaded.
type indexed struct {
	App        string `json:"app"`
	Identifier string `json:"identifier,omitempty"`
	Held       int    `json:"held"`
}

// RegisterFile records that the installations file at path is app's (the
// client id of the app whose descriptor has identifier) and holds held
// installations, and returns the stores of the same app under another
// client id that held some when they last loaded, each named by its
// client id and file: an app whose store is empty while its own other
// store is not has most likely had its client_id changed. The stores of
// other apps (another identifier) are never named, nor those whose
// identifier is not known (files of an earlier version, and ones not in
// the index): a second app on the same machine is no sign of a mistake.
func RegisterFile(path, app, identifier string, held int) (others []string, err error) {
	dir, name := filepath.Split(path)
	index := map[string]indexed{}
	if raw, err := os.ReadFile(filepath.Join(dir, appsIndex)); err == nil {
		_ = json.Unmarshal(raw, &index) // a damaged index is written anew
	}
	if me := (indexed{app, identifier, held}); index[name] != me {
		index[name] = me
		raw, _ := json.Marshal(index)
		tmp := filepath.Join(dir, appsIndex+".tmp")
		if err := os.WriteFile(tmp, raw, 0o600); err != nil {
			return nil, fmt.Errorf("recording the app of %s: %w", path, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, appsIndex)); err != nil {
			return nil, fmt.Errorf("recording the app of %s: %w", path, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.db"))
	for _, f := range files {
		base := filepath.Base(f)
		other, ok := index[base]
		if base == name || !ok || !SameApp(identifier, other.Identifier) || other.App == app {
			continue
		}
		if other.Held > 0 {
			others = append(others, fmt.Sprintf("%s (%s)", other.App, f))
		}
	}
	sort.Strings(others)
	return others, nil
}

// SameApp tells whether two descriptor identifiers, as stores record
// them, are known to be one app's.
func SameApp(identifier, other string) bool {
	return identifier != "" && identifier == other
}

// ClientIDChanged is what a load says when an app's store holds no
// installation while the same app's store under another client id does.
func ClientIDChanged(app string, others []string) string {
	return "service_app's installations store for client_id " + app + " is empty, while installations of the same app (its descriptor's identifier) are kept beside it for " +
		strings.Join(others, ", ") + ": if client_id was changed by mistake, set it back; if the app was registered anew, " +
		"its organizations install it again (records are bound to their app's client_id and do not open under another), " +
		"and the other store can be removed once no config uses it"
}
