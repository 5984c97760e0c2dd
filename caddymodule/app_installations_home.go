package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"

	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// installationsHome is the directory of the installations files under
// root, a directory where Caddy keeps its data.
func installationsHome(root string) string {
	return filepath.Join(root, "servicegate", "installations")
}

// storageRoot is the directory of Caddy's file_system storage when the
// config sets one (the `storage file_system <root>` global option), else
// Caddy's data directory (the XDG data directory, or $CADDY_DATA_DIR),
// which is also the default storage's.
func storageRoot(ctx caddy.Context) string {
	if !hasConfig(ctx) {
		return caddy.AppDataDir()
	}
	st := ctx.Storage()
	if fs, ok := st.(*certmagic.FileStorage); ok && st != caddy.DefaultStorage && fs.Path != "" {
		return fs.Path
	}
	return caddy.AppDataDir()
}

// installationsFile is the file of the app's installations on disk: one
// per app (its client id) under Caddy's storage root. A file that an
// earlier version kept in Caddy's data directory while storage names
// another root is used where it is, with a warning that says how to move
// it: organizations would otherwise have to install the app again.
func (a *ServiceApp) installationsFile(ctx caddy.Context) string {
	sum := sha256.Sum256([]byte(a.clientID))
	name := hex.EncodeToString(sum[:8]) + ".db"
	path := filepath.Join(installationsHome(storageRoot(ctx)), name)
	earlier := filepath.Join(installationsHome(caddy.AppDataDir()), name)
	if earlier != path && !fileExists(path) && fileExists(earlier) {
		a.logger.Warn("the installations are still kept in Caddy's data directory, not under the root of the storage option: stop Caddy, move the directory there, and start it again",
			zap.String("file", earlier), zap.String("move_to", filepath.Dir(path)))
		return earlier
	}
	return path
}
