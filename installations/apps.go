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

// indexed is what the index says of one installations file: its app,
// and how many installations it held when that app last loaded.
type indexed struct {
	App  string `json:"app"`
	Held int    `json:"held"`
}

// RegisterFile records that the installations file at path is app's and
// holds held installations, and returns the other apps whose
// installations files are in the same directory and held some when they
// last loaded, each named by its client id (or by its file, for a file of
// an earlier version). An app whose store is empty while another's is not
// has most likely had its client_id changed.
func RegisterFile(path, app string, held int) (others []string, err error) {
	dir, name := filepath.Split(path)
	index := map[string]indexed{}
	if raw, err := os.ReadFile(filepath.Join(dir, appsIndex)); err == nil {
		_ = json.Unmarshal(raw, &index) // a damaged index is written anew
	}
	if index[name] != (indexed{app, held}) {
		index[name] = indexed{app, held}
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
		if base == name {
			continue
		}
		other, ok := index[base]
		switch {
		case !ok:
			others = append(others, "another client_id ("+f+")")
		case other.Held > 0:
			others = append(others, fmt.Sprintf("%s (%s)", other.App, f))
		}
	}
	sort.Strings(others)
	return others, nil
}

// ClientIDChanged is what a load says when an app's store holds no
// installation while other apps' stores beside it do.
func ClientIDChanged(app string, others []string) string {
	return "service_app's installations store for client_id " + app + " is empty, while installations are kept beside it for " +
		strings.Join(others, ", ") + ": if client_id was changed by mistake, set it back; if the app was registered anew, " +
		"its organizations install it again (records are bound to their app's client_id and do not open under another), " +
		"and the other store can be removed once no config uses it"
}
