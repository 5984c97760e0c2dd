package caddymodule

import (
	"context"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/oauth"
)

// sweepOAuthStorage deletes, now and then every oauthSweepEvery until the
// config is unloaded, the entries in storage that have surely ended:
// logins not written for a login lifetime, sessions not written for a
// session lifetime (a session is written when it starts and on every
// refresh, and never lives longer than sessionLifetime). Entries the
// browser never came back for are removed this way; the others are
// removed when they end. Several instances sweeping at once is harmless.
func sweepOAuthStorage(ctx caddy.Context, st certmagic.Storage, sessionLifetime time.Duration, logger *zap.Logger) {
	tick := time.NewTicker(oauthSweepEvery)
	defer tick.Stop()
	for {
		n := sweepStorageFolder(ctx, st, oauthLoginsPrefix, oauth.DefaultLoginLifetime) +
			sweepStorageFolder(ctx, st, oauthStoragePrefix, sessionLifetime)
		if n > 0 {
			logger.Info("removed ended sessions and logins from storage", zap.Int("entries", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepStorageFolder deletes the entries under prefix not written for
// longer than maxAge, and returns how many it deleted.
func sweepStorageFolder(ctx context.Context, st certmagic.Storage, prefix string, maxAge time.Duration) int {
	keys, err := st.List(ctx, prefix, false)
	if err != nil {
		return 0
	}
	now, n := time.Now(), 0
	for _, key := range keys {
		info, err := st.Stat(ctx, key)
		if err != nil || !info.IsTerminal || now.Sub(info.Modified) <= maxAge {
			continue
		}
		if st.Delete(ctx, key) == nil {
			n++
		}
	}
	return n
}
