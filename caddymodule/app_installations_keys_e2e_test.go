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

// TestInstallationsKeyRotationE2E runs the rotation procedure of docs/guides/rotating-installations-key.md on
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
	// At run time: globex's record damaged and the change announced, as
	// another instance announces one, is skipped; and acme's installation is
	// repaired below.
	if _, err := srv.Do("HSET", hash, "2", "damaged"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("PUBLISH", hash+":changed", "2"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		resp := deliverTo(t, base, "globex.example", "2", globex)
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("globex's record damaged at run time: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.logText(), `"organization":"2"`) {
		t.Error("the record damaged at run time is not logged")
	}

	// Installed again, acme is repaired.
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "acme.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("reinstall: %+v %v", call, err)
	}
	acme, _ = svc.AppSecret("acme.example")
	deadline = time.Now().Add(2 * time.Second)
	for deliverTo(t, base, "acme.example", "1", acme).StatusCode != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("acme's reinstallation did not repair it")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Acme's repaired record copied into another app's store, under the same
	// organization and sealed with the same key, does not open there: seals
	// bind the app.
	acmeRecord, _ := srv.Do("HGET", hash, "1")
	otherBase := "http://127.0.0.1:" + strconv.Itoa(freePort())
	otherSite := strings.Replace(svc.site(t, app.URL), "http://localhost:{port}", otherBase, 1)
	otherSite = strings.Replace(otherSite, "client_id "+svc.clientID, "client_id another-app", 1)
	if _, err := srv.Do("HSET", redisInstallationsKey("another-app"), "1", acmeRecord); err != nil {
		t.Fatal(err)
	}
	other := startCaddyProcess(t, "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis "+srv.URL()+"\n\t}\n}\n"+otherSite)
	waitListening(t, otherBase+"/manifest.json", other)
	if resp := deliverTo(t, otherBase, "acme.example", "1", acme); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a record copied from another app: %d\n%s", resp.StatusCode, other.logText())
	}
	if !strings.Contains(other.logText(), `"organization":"1"`) {
		t.Error("the copied record is not reported")
	}
}

// TestInstallationsClientIDChangeIsTold: a load whose client_id finds an
// empty store while another client_id's store beside it holds
// installations says so, naming both, on disk and in Redis.
func TestInstallationsClientIDChangeIsTold(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Caddy processes: skipped in -short mode")
	}
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	base := "http://127.0.0.1:" + strconv.Itoa(freePort())
	global := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n}\n"
	site := strings.Replace(svc.site(t, app.URL), "http://localhost:{port}", base, 1)
	data := t.TempDir()
	first := startCaddyProcess(t, global+site, "XDG_DATA_HOME="+data)
	waitListening(t, base+"/manifest.json", first)
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "globex.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	first.kill()

	changed := strings.Replace(site, "client_id "+svc.clientID, "client_id renamed-client", 1)
	second := startCaddyProcess(t, global+changed, "XDG_DATA_HOME="+data)
	waitListening(t, base+"/manifest.json", second)
	log := second.logText()
	if !strings.Contains(log, "client_id renamed-client is empty") || !strings.Contains(log, svc.clientID+" (") {
		t.Fatalf("the client_id change is not told, naming both:\n%s", log)
	}
	second.kill()

	// In Redis.
	srv := redistest.Start(t)
	redisGlobal := "{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n\tservicegate {\n\t\tredis " + srv.URL() + "\n\t}\n}\n"
	third := startCaddyProcess(t, redisGlobal+site)
	waitListening(t, base+"/manifest.json", third)
	if call, err := svc.InstallApp(context.Background(), nil, base+"/installed", "initech.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("install in Redis: %+v %v", call, err)
	}
	third.kill()
	fourth := startCaddyProcess(t, redisGlobal+changed)
	waitListening(t, base+"/manifest.json", fourth)
	if log := fourth.logText(); !strings.Contains(log, "client_id renamed-client is empty") || !strings.Contains(log, svc.clientID+" (servicegate:installations:") {
		t.Fatalf("the client_id change in Redis is not told:\n%s", log)
	}
}

// TestInstallationsAdminScopedToAnApp: two service_app sites with their
// own client_id; the admin API names each entry's app, and its token and
// removal act on the app ?app= names, required with two.
func TestInstallationsAdminScopedToAnApp(t *testing.T) {
	one := newTenantsService(t)
	app := newLifecycleUpstream(t)
	// A second app, with a client_id of its own, on another port.
	twoID := one.clientID + "-two"
	siteTwo := strings.Replace(one.site(t, app.URL), "http://localhost:{port}", "http://localhost:"+strconv.Itoa(freePort()), 1)
	siteTwo = strings.Replace(siteTwo, "client_id "+one.clientID, "client_id "+twoID, 1)
	startCaddy(t, one.site(t, app.URL)+siteTwo)
	one.install(t, "acme.example")
	status, list := adminCall(t, "GET", "/service/installations", "")
	if status != 200 || !strings.Contains(list, `"app":"`+one.clientID+`"`) {
		t.Fatalf("listing: %d %s", status, list)
	}
	if status, msg := adminCall(t, "POST", "/service/installations/token", `{"organization":"acme.example"}`); status != http.StatusBadRequest || !strings.Contains(msg, "?app=") {
		t.Fatalf("a token without ?app= with two apps: %d %s", status, msg)
	}
	if status, msg := adminCall(t, "POST", "/service/installations/token?app="+one.clientID+"&app="+one.clientID, `{"organization":"acme.example"}`); status != http.StatusBadRequest {
		t.Fatalf("a repeated ?app=: %d %s", status, msg)
	}
	status, tok := adminCall(t, "POST", "/service/installations/token?app="+one.clientID, `{"organization":"acme.example"}`)
	if status != 200 || !strings.Contains(tok, "access_token") {
		t.Fatalf("a token of the first app: %d %s", status, tok)
	}
	if status, _ := adminCall(t, "DELETE", "/service/installations?organization=acme.example&app="+twoID, ""); status != http.StatusNotFound {
		t.Fatalf("removing from the app that does not hold it: %d", status)
	}
	if status, _ := adminCall(t, "DELETE", "/service/installations?organization=acme.example&app="+one.clientID, ""); status != 200 {
		t.Fatalf("removing from the first app: %d", status)
	}
}
