package installations

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/oauth"
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
	h, err := NewHandler(HandlerConfig{Book: book, ClientID: "client-1", Forward: true,
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
	if got, ok := book.Secret("acme.example"); !ok || got != secret {
		t.Fatal("the installation the service made was not stored")
	}
	tok, _, err := book.Token(ctx, "42")
	if err != nil || tok == "" {
		t.Fatalf("token: %v", err)
	}

	// The service refuses a secret it did not give.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("43", "globex.example", "s3cret-made-up")))
	if err := h.Serve(w, r, app); err != nil || w.Code != http.StatusForbidden {
		t.Fatalf("made-up installation: %d %v", w.Code, err)
	}
	if _, ok := book.Secret("globex.example"); ok {
		t.Fatal("a made-up installation was stored")
	}

	call, err = svc.UninstallApp(ctx, nil, gateway.URL+"/uninstall", "acme.example", service.URL)
	if err != nil || !call.OK() || book.Len() != 0 {
		t.Fatalf("uninstall: %+v %v, %d held", call, err, book.Len())
	}
}
