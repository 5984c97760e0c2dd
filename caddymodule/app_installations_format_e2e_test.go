package caddymodule

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// sealFormat1 seals the installation of organization as servicegate
// sealed records before format 2, from the format alone: a version byte
// 1, a nonce, and AES-256-GCM under the HKDF-SHA256 of key, with the
// organization (and no app) as additional data.
func sealFormat1(t *testing.T, key, organization, domain, secret string) string {
	t.Helper()
	derived, err := hkdf.Key(sha256.New, []byte(key), nil, "servicegate installations v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(derived)
	aead, _ := cipher.NewGCM(block)
	plain, _ := json.Marshal(map[string]any{"organizationId": organization, "domain": domain, "appId": "demo-app",
		"appSecret": secret, "userId": "7", "installedAt": "2025-01-01T00:00:00Z"})
	out := make([]byte, 1+aead.NonceSize())
	out[0] = 1
	_, _ = rand.Read(out[1:])
	return string(aead.Seal(out, out[1:], plain, []byte("organization:"+organization)))
}

// TestE2EFormat1RecordOpensOnlyInItsMigration: a format-1 record (sealed
// before seals named the app) written into the store of a second app
// created at format 2, with the same key, does not open there: the
// organization's deliveries get 503 with Retry-After and the record is
// not sealed again as that app's. In a store written before format 2, the
// same records open, are sealed again in format 2, and the store records
// its format.
func TestE2EFormat1RecordOpensOnlyInItsMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	global := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis " + srv.URL() + "\n\t}\n}\n"
	start := func(client string) (*caddyProcess, string) {
		base := "http://127.0.0.1:" + strconv.Itoa(freePort())
		site := strings.Replace(svc.site(t, app.URL), "http://localhost:{port}", base, 1)
		site = strings.Replace(site, "client_id "+svc.clientID, "client_id "+client, 1)
		p := startCaddyProcess(t, global+site)
		waitListening(t, base+"/manifest.json", p)
		return p, base
	}
	recordFormat := func(client, org string) byte {
		v, err := srv.Do("HGET", redisInstallationsKey(client), org)
		if err != nil || v == "" {
			t.Fatalf("the record of %s in %s's store: %q %v", org, client, v, err)
		}
		return v[0]
	}

	// The first app's installation of globex, as the service made it.
	first, base := start(svc.clientID)
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "globex.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	globex, _ := svc.AppSecret("globex.example")
	first.kill()

	// A second app with the same key: its store, created empty, is at
	// format 2. Globex's record of format 1 (from a backup, say) and one of
	// acme are written into it.
	second, _ := start("second-app")
	second.kill()
	acme := "the second app's secret for acme"
	for _, r := range []struct{ org, domain, secret string }{{"1", "acme.example", acme}, {"2", "globex.example", globex}} {
		if _, err := srv.Do("HSET", redisInstallationsKey("second-app"), r.org, sealFormat1(t, testInstallationsKey, r.org, r.domain, r.secret)); err != nil {
			t.Fatal(err)
		}
	}
	second, base = start("second-app")
	for _, c := range []struct{ domain, id, secret string }{{"globex.example", "2", globex}, {"acme.example", "1", acme}} {
		code, retry := deliverNamed(t, base, c.domain, c.id, c.secret)
		if code != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("%s's format-1 record in a store created at format 2: %d, Retry-After %q; want 503\n%s", c.domain, code, retry, second.logText())
		}
	}
	if f := recordFormat("second-app", "2"); f != 1 {
		t.Errorf("globex's format-1 record was sealed again as the second app's (format %d)", f)
	}
	second.kill()

	// A store written before format 2: records of format 1 only, no format
	// recorded. They open, are sealed again, and the store is at format 2.
	for org, d := range map[string]string{"1": "acme.example", "2": "globex.example"} {
		if _, err := srv.Do("HSET", redisInstallationsKey("old-app"), org, sealFormat1(t, testInstallationsKey, org, d, "old secret of "+d)); err != nil {
			t.Fatal(err)
		}
	}
	old, base := start("old-app")
	for org, d := range map[string]string{"1": "acme.example", "2": "globex.example"} {
		if code, _ := deliverNamed(t, base, d, org, "old secret of "+d); code != http.StatusOK {
			t.Errorf("%s in a store written before format 2: %d\n%s", d, code, old.logText())
		}
		if f := recordFormat("old-app", org); f != 2 {
			t.Errorf("%s's record was not sealed again in format 2 (format %d)", d, f)
		}
	}
	if v, err := srv.Do("GET", redisInstallationsKey("old-app")+":format"); err != nil || v != `{"version":2}` {
		t.Errorf("the migrated store's format: %q %v", v, err)
	}
}
