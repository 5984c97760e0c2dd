package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// The keys of the rotation test.
const (
	rotationOldKey = "the old installations key, 32 bytes+"
	rotationNewKey = "the new installations key, 32 bytes+"
)

// redisInstallationsKey is the Redis hash of the installations of client.
func redisInstallationsKey(client string) string {
	sum := sha256.Sum256([]byte(client))
	return "servicegate:installations:" + hex.EncodeToString(sum[:8])
}

// keysInstance is one Caddy process of the rotation test: the site of
// svc's app, sealing with key and opening with retired too, on redis.
func keysInstance(t *testing.T, svc *tenantsService, app, redisURL, base, keys string) *caddyProcess {
	t.Helper()
	site := strings.Replace(svc.site(t, app), "http://localhost:{port}", base, 1)
	site = strings.Replace(site, `key "`+testInstallationsKey+`"`, keys, 1)
	global := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis " + redisURL + "\n\t\ttimeout 2s\n\t}\n}\n"
	p := startCaddyProcess(t, global+site)
	waitListening(t, base+"/manifest.json", p)
	return p
}

// deliverTo sends a signed delivery of domain (and id, when set) to the
// site at base.
func deliverTo(t *testing.T, base, domain, id, secret string) *http.Response {
	t.Helper()
	req := signedDelivery(base, domain, secret)
	if id != "" {
		req.Header.Set("X-Service-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestInstallationsKeyRotationE2E runs the README's rotation procedure on
// two instances sharing Redis, across restarts: the installations outlive
// the key change, no organization reinstalls, and once the old key is
// retired and gone, the records open with the new key alone.
func TestInstallationsKeyRotationE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	bases := []string{"http://127.0.0.1:" + strconv.Itoa(freePort()), "http://127.0.0.1:" + strconv.Itoa(freePort())}
	run := func(i int, keys string) *caddyProcess {
		return keysInstance(t, svc, app.URL, srv.URL(), bases[i], keys)
	}
	old := `key "` + rotationOldKey + `"`
	procs := []*caddyProcess{run(0, old), run(1, old)}
	if call, err := svc.InstallApp(context.Background(), nil, bases[0]+"/installed", "acme.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	acme, _ := svc.AppSecret("acme.example")
	served := func(step string) {
		t.Helper()
		for _, base := range bases {
			if resp := deliverTo(t, base, "acme.example", "1", acme); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: a delivery on %s: %d", step, base, resp.StatusCode)
			}
		}
	}
	sealedVersion := func() string {
		v, err := srv.Do("HGET", redisInstallationsKey(svc.clientID), "1")
		if err != nil || v == "" {
			t.Fatalf("the record in Redis: %q %v", v, err)
		}
		return strconv.Itoa(int(v[0]))
	}
	served("before the rotation")

	// Step 1: every instance can open records sealed under the new key.
	for i := range procs {
		procs[i].kill()
		procs[i] = run(i, old+"\n\t\t\tretired_keys \""+rotationNewKey+"\"")
	}
	served("step 1")
	// Step 2: every instance seals under the new key; the old one opens.
	rotated := `key "` + rotationNewKey + `"` + "\n\t\t\tretired_keys \"" + rotationOldKey + `"`
	for i := range procs {
		procs[i].kill()
		procs[i] = run(i, rotated)
		served("step 2, instance " + strconv.Itoa(i) + " restarted")
	}
	if v := sealedVersion(); v != "2" {
		t.Fatalf("the record's format after step 2: %s", v)
	}
	// Step 3: the old key goes; the record opens with the new key alone.
	for i := range procs {
		procs[i].kill()
		procs[i] = run(i, `key "`+rotationNewKey+`"`)
	}
	served("step 3")

	// An instance that has only the old key skips the record: acme's
	// deliveries are answered 503 with Retry-After, not 403, and the
	// instance starts.
	procs[1].kill()
	procs[1] = run(1, old)
	resp := deliverTo(t, bases[1], "acme.example", "1", acme)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a record under no configured key: %d %v", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(procs[1].logText(), `"organization":"1"`) || strings.Contains(procs[1].logText(), acme) {
		t.Fatalf("the skipped record is not logged by organization, or the log holds its secret:\n%s", procs[1].logText())
	}
}

// TestInstallationsBadRecordHarmsNothing: a garbage record in the shared
// store is skipped at start and when another instance announces it: every
// other organization keeps working, the instance starts, and the bad
// organization's deliveries are answered 503 with Retry-After.
func TestInstallationsBadRecordHarmsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	srv := redistest.Start(t)
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	base := "http://127.0.0.1:" + strconv.Itoa(freePort())
	key := `key "` + testInstallationsKey + `"`
	p := keysInstance(t, svc, app.URL, srv.URL(), base, key)
	for _, d := range []string{"acme.example", "globex.example"} {
		if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", d, svc.URL); err != nil || !call.OK() {
			t.Fatalf("install %s: %+v %v", d, call, err)
		}
	}
	hash := redisInstallationsKey(svc.clientID)
	if _, err := srv.Do("HSET", hash, "999", "garbage"); err != nil {
		t.Fatal(err)
	}
	// Globex's record copied under acme's id: another organization's seal.
	globexRecord, _ := srv.Do("HGET", hash, "2")
	if _, err := srv.Do("HSET", hash, "1", globexRecord); err != nil {
		t.Fatal(err)
	}
	p.kill()
	p = keysInstance(t, svc, app.URL, srv.URL(), base, key)
	globex, _ := svc.AppSecret("globex.example")
	acme, _ := svc.AppSecret("acme.example")
	if resp := deliverTo(t, base, "globex.example", "2", globex); resp.StatusCode != http.StatusOK {
		t.Fatalf("globex beside bad records: %d\n%s", resp.StatusCode, p.logText())
	}
	for _, c := range []struct{ domain, id, secret string }{{"acme.example", "1", acme}, {"hooli.example", "999", acme}} {
		resp := deliverTo(t, base, c.domain, c.id, c.secret)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a delivery of %s, whose record does not open: %d", c.id, resp.StatusCode)
		}
	}
	for _, org := range []string{`"organization":"1"`, `"organization":"999"`} {
		if strings.Count(p.logText(), org) == 0 {
			t.Errorf("the skipped record %s is not logged", org)
		}
	}
	// Installed again, acme is repaired.
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "acme.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("reinstall: %+v %v", call, err)
	}
	acme, _ = svc.AppSecret("acme.example")
	deadline := time.Now().Add(2 * time.Second)
	for deliverTo(t, base, "acme.example", "1", acme).StatusCode != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("acme's reinstallation did not repair it")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
