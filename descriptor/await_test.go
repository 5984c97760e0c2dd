package descriptor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAwait: attempts go on, with growing waits up to the cap, until one
// succeeds; a cancelled context ends the waiting at once.
func TestAwait(t *testing.T) {
	var waits []time.Duration
	n := 0
	v, err := Await(context.Background(), Backoff{First: time.Millisecond, Max: 4 * time.Millisecond},
		func(context.Context) (int, error) {
			if n++; n < 5 {
				return 0, errors.New("not yet")
			}
			return n, nil
		},
		func(_ error, wait time.Duration) { waits = append(waits, wait) })
	if v != 5 || err != nil {
		t.Fatalf("Await = %d, %v", v, err)
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("waits %v, want %v", waits, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Await(ctx, Backoff{First: time.Hour, Max: time.Hour}, func(context.Context) (int, error) { return 0, errors.New("down") }, nil)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Await = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Await went on after its context ended")
	}
}

// TestLoaderAwait: an address that does not answer is awaited; a failure
// of another kind (an answer that is no descriptor) is told once, then the
// descriptor is read. Labels hold no credentials.
func TestLoaderAwait(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n++; n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			io.WriteString(w, `{"modules":{"webhook":[{"key":"w","url":"/*"}]}}`)
		default:
			io.WriteString(w, good)
		}
	}))
	defer srv.Close()
	source := srv.URL + "/manifest.json"
	if Awaitable(source, &Defects{}) || Awaitable("manifest.json", errors.New("no file")) || !Awaitable(source, errors.New("refused")) {
		t.Error("Awaitable tells a mistake from an app not up yet wrongly")
	}
	var changed []error
	retries := 0
	d, err := (&Loader{}).Await(context.Background(), source, errors.New("connection refused"),
		func(err error) { changed = append(changed, err) },
		func(error, time.Duration) { retries++ })
	if err != nil || d == nil {
		t.Fatalf("Await: %v", err)
	}
	var defects *Defects
	if retries != 2 || len(changed) != 1 || !errors.As(changed[0], &defects) {
		t.Errorf("%d retries, changed %v", retries, changed)
	}
	if got := Label("http://user:secret@app.example/manifest.json"); strings.Contains(got, "secret") || Label("a.json") != "a.json" {
		t.Errorf("Label %q", got)
	}
}
