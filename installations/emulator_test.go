package installations

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/oauth"
	"github.com/servicegate/servicegate/token"
)

// TestHandlerWithEmulatedService runs the lifecycle against the emulated
// service: an installation it made is proved and stored, its token is the
// service's, an uninstall with its secret removes it.
func TestHandlerWithEmulatedService(t *testing.T) {
	svc, err := emulator.New(emulator.Config{ClientID: "client-1", ClientSecret: "client-secret",
		RedirectURIs:  []string{"http://localhost/callback"},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 42}, {Domain: "globex.example", ID: 43}}})
	if err != nil {
		t.Fatal(err)
	}
	service := httptest.NewServer(svc)
	defer service.Close()

	sealer, _ := NewSealer(testKey)
	book, err := NewBook(BookConfig{Store: NewMemoryStore(), Sealer: sealer,
		Grant: ServiceGrant(&oauth.Client{AuthURL: service.URL, ClientID: "client-1", ClientSecret: "client-secret"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	app := &app{}
	verifier := token.NewVerifier(token.HMAC([]byte("client-secret")), token.Options{Audience: []string{"client-1"}})
	prove := func(ctx context.Context, raw string) (Org, error) {
		claims, err := verifier.Verify(ctx, raw)
		return OrgOf(claims), err
	}
	h, err := NewHandler(HandlerConfig{Book: book, ClientID: "client-1", Forward: true, Prove: prove,
		Paths: [NumKinds]string{Installed: "/installed", Uninstall: "/uninstall", SubscriptionPaid: "/paid"}})
	if err != nil {
		t.Fatal(err)
	}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.Serve(w, r, app); err != nil {
			t.Error(err)
		}
	}))
	defer gateway.Close()
	ctx := context.Background()

	call, err := svc.InstallApp(ctx, nil, gateway.URL+"/installed", "acme.example", service.URL)
	if err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	secret, _ := svc.AppSecret("acme.example")
	if got, ok := book.Secret(Org{Domain: "acme.example"}); !ok || got != secret {
		t.Fatal("the installation the service made was not stored")
	}
	tok, _, err := book.Token(ctx, Org{ID: "42"})
	if err != nil || tok == "" {
		t.Fatalf("token: %v", err)
	}

	// The service refuses a secret it did not give.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("43", "globex.example", "s3cret-made-up")))
	if err := h.Serve(w, r, app); err != nil || w.Code != http.StatusForbidden {
		t.Fatalf("made-up installation: %d %v", w.Code, err)
	}
	if _, ok := book.Secret(Org{Domain: "globex.example"}); ok {
		t.Fatal("a made-up installation was stored")
	}

	// globex, with its own real secret, names acme's id, or acme's domain
	// as its id: the service's app token names globex, nothing is stored.
	if call, err := svc.InstallApp(ctx, nil, gateway.URL+"/installed", "globex.example", service.URL); err != nil || !call.OK() {
		t.Fatalf("install globex: %+v %v", call, err)
	}
	globex, _ := svc.AppSecret("globex.example")
	for _, org := range []string{"42", "acme.example"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody(org, "globex.example", globex)))
		if err := h.Serve(w, r, app); err != nil || w.Code != http.StatusForbidden {
			t.Fatalf("globex naming %s: %d %v", org, w.Code, err)
		}
	}
	if got, _ := book.Secret(Org{ID: "42"}); got != secret || book.Len() != 2 {
		t.Fatalf("acme's installation was taken over: %d held", book.Len())
	}

	call, err = svc.UninstallApp(ctx, nil, gateway.URL+"/uninstall", "acme.example", service.URL)
	if err != nil || !call.OK() || book.Len() != 1 {
		t.Fatalf("uninstall: %+v %v, %d held", call, err, book.Len())
	}
}
