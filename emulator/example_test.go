package emulator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// A test of a gateway or an app points its subscription base URL at an
// emulator served by httptest.
func Example() {
	srv, err := emulator.New(emulator.Config{
		ClientID:     "demo-client",
		ClientSecret: "demo-client-secret",
		RedirectURIs: []string{"http://localhost:8080/callback"},
		Organizations: []emulator.Organization{
			{Domain: "acme.example", ID: 1, ActiveUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
	})
	if err != nil {
		panic(err)
	}
	service := httptest.NewServer(srv)
	defer service.Close()

	token, err := emulator.MintToken("demo-client-secret", emulator.Token{
		Issuer: emulator.DefaultIssuer, Audience: "demo-client",
		UserID: 7, OrganizationID: 1, Domain: "acme.example", Lifetime: time.Hour,
	})
	if err != nil {
		panic(err)
	}
	req, _ := http.NewRequest(http.MethodGet, service.URL+"/api/v2/applications/demo-app/subscription", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, srv.Queries("acme.example"))
	// Output: 200 1
}
