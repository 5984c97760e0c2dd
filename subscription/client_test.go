package subscription

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// service is an httptest stand-in of the service answering every
// subscription query with status and body, recording what it was sent.
func service(t *testing.T, status int, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	got := new(http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*got = *r.Clone(context.Background())
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestQueryAnswers(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	tests := []struct {
		name    string
		status  int
		body    string
		loc     *time.Location
		want    Answer
		wantErr bool
	}{
		{"active", 200, `{"expires":"2030-01-01 00:00:00"}`, nil,
			Answer{Status: Active, Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, false},
		{"active in a time zone", 200, `{"expires":"2030-01-01 00:00:00"}`, berlin,
			Answer{Status: Active, Expires: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC)}, false},
		{"active RFC 3339", 200, `{"expires":"2030-01-01T00:00:00+02:00"}`, nil,
			Answer{Status: Active, Expires: time.Date(2029, 12, 31, 22, 0, 0, 0, time.UTC)}, false},
		{"active with extra fields", 200, `{"expires":"2030-01-01 00:00:00","plan":"x"}`, nil,
			Answer{Status: Active, Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, false},
		{"active in the past", 200, `{"expires":"2000-01-01 00:00:00"}`, nil,
			Answer{Status: Active, Expires: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}, false},
		{"unpaid", 402, `{"subscribe_link":"https://service.example/checkout?app=a&b=1"}`, nil,
			Answer{Status: Unpaid, SubscribeLink: "https://service.example/checkout?app=a&b=1"}, false},
		{"unpaid camel case", 402, `{"subscribeLink":"http://service.example/c"}`, nil,
			Answer{Status: Unpaid, SubscribeLink: "http://service.example/c"}, false},
		{"not found 400", 400, `{"message":"app identifier not found"}`, nil,
			Answer{Status: NotFound, Message: "app identifier not found"}, false},
		{"not found 404 without body", 404, ``, nil, Answer{Status: NotFound}, false},
		{"not found 404 with HTML", 404, `<html>nope</html>`, nil, Answer{Status: NotFound}, false},
		{"unauthorized", 401, `{"message":"bad token"}`, nil, Answer{Status: Unauthorized}, false},

		{"5xx", 503, `{"message":"down"}`, nil, Answer{}, true},
		{"500", 500, ``, nil, Answer{}, true},
		{"other status", 403, `{}`, nil, Answer{}, true},
		{"redirect", 302, ``, nil, Answer{}, true},
		{"200 garbage", 200, `<html>`, nil, Answer{}, true},
		{"200 without expires", 200, `{}`, nil, Answer{}, true},
		{"200 expires not a string", 200, `{"expires":1893456000}`, nil, Answer{}, true},
		{"200 bad date", 200, `{"expires":"next year"}`, nil, Answer{}, true},
		{"200 empty body", 200, ``, nil, Answer{}, true},
		{"402 garbage", 402, `not json`, nil, Answer{}, true},
		{"402 without link", 402, `{}`, nil, Answer{}, true},
		{"402 javascript link", 402, `{"subscribe_link":"javascript:alert(1)"}`, nil, Answer{}, true},
		{"402 relative link", 402, `{"subscribe_link":"/checkout"}`, nil, Answer{}, true},
		{"402 link with user info", 402, `{"subscribe_link":"https://u:p@evil.example/"}`, nil, Answer{}, true},
		{"402 link with a newline", 402, `{"subscribe_link":"https://a.example/\r\nSet-Cookie: x"}`, nil, Answer{}, true},
		{"oversized body", 200, `{"expires":"2030-01-01 00:00:00","pad":"` + strings.Repeat("x", maxBody) + `"}`, nil, Answer{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := service(t, tt.status, tt.body)
			c := &Client{Location: tt.loc}
			got, err := c.Query(context.Background(), srv.URL, "my-app", "secret-token")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("answer %+v, want an error", got)
				}
				if strings.Contains(err.Error(), "secret-token") {
					t.Fatalf("error %q holds the token", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.want.Status || !got.Expires.Equal(tt.want.Expires) ||
				got.SubscribeLink != tt.want.SubscribeLink || got.Message != tt.want.Message {
				t.Fatalf("answer %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestQuerySendsTheRequestTheServiceExpects(t *testing.T) {
	srv, got := service(t, 200, `{"expires":"2030-01-01 00:00:00"}`)
	c := &Client{}
	if _, err := c.Query(context.Background(), srv.URL+"/", "my app/1", "tok.en"); err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodGet {
		t.Errorf("method %s", got.Method)
	}
	if got.URL.EscapedPath() != "/api/v2/applications/my%20app%2F1/subscription" {
		t.Errorf("path %s", got.URL.EscapedPath())
	}
	if a := got.Header.Get("Authorization"); a != "Bearer tok.en" {
		t.Errorf("Authorization %q", a)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestQueryTimeoutAndUnreachable(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := &Client{}
	if _, err := c.Query(ctx, slow.URL, "app", "t"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline error", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	addr := closed.URL
	closed.Close()
	if _, err := c.Query(context.Background(), addr, "app", "t"); err == nil {
		t.Fatal("no error from a closed server")
	}
}

func TestValidateBaseURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://api.service.example", true},
		{"http://localhost:8080/", true},
		{"https://acme.api.service.example/prefix", true},
		{"ftp://api.service.example", false},
		{"api.service.example", false},
		{"https://", false},
		{"https://user:pass@api.service.example", false},
		{"https://.api.service.example", false},
		{"https://a..b", false},
		{"https://api.service.example?x=1", false},
		{"https://api.service.example/#f", false},
		{"https:opaque", false},
		{"https://api.service.example/\x00", false},
		{"", false},
	}
	for _, tt := range tests {
		err := ValidateBaseURL(tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateBaseURL(%q) = %v, want ok=%v", tt.url, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("error %q repeats user info", err)
		}
	}
	c := &Client{}
	if _, err := c.Query(context.Background(), "https://u:p@x.example", "app", "t"); !errors.Is(err, ErrBaseURL) {
		t.Fatalf("Query with a bad base URL: %v", err)
	}
}

func FuzzParseAnswers(f *testing.F) {
	f.Add([]byte(`{"expires":"2030-01-01 00:00:00"}`))
	f.Add([]byte(`{"expires":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"subscribe_link":"https://x.example/"}`))
	f.Add([]byte(`{"subscribeLink":"javascript:x"}`))
	f.Add([]byte(`{"message":"no"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		if a, err := parseActive(body, time.UTC); err == nil && a.Status != Active {
			t.Fatalf("parseActive gave %v", a.Status)
		}
		if a, err := parseUnpaid(body); err == nil && (a.Status != Unpaid || !httpLink(a.SubscribeLink)) {
			t.Fatalf("parseUnpaid gave %+v", a)
		}
		if a := parseNotFound(body); a.Status != NotFound {
			t.Fatalf("parseNotFound gave %v", a.Status)
		}
	})
}

func FuzzValidateBaseURL(f *testing.F) {
	f.Add("https://api.service.example")
	f.Add("https://u:p@x")
	f.Add("http://[::1]:80/x")
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateBaseURL(s) != nil {
			return
		}
		q, err := QueryURL(s, "app")
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(q)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			t.Fatalf("query URL %q from a valid base URL %q", q, s)
		}
		if !strings.HasSuffix(u.Path, "/api/v2/applications/app/subscription") || u.RawQuery != "" {
			t.Fatalf("query URL %q from a valid base URL %q", q, s)
		}
	})
}
