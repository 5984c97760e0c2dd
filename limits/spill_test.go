package limits

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestSpillBuffer(t *testing.T) {
	dir := t.TempDir()
	initial := http.Header{"X-Before": {"1"}}

	// within the memory limit: kept in memory, sent as it is
	sb := NewSpillBuffer(initial, 10, 100, dir)
	sb.Header().Set("X-App", "1")
	sb.WriteHeader(http.StatusCreated)
	if _, err := io.WriteString(sb, "small"); err != nil {
		t.Fatal(err)
	}
	if initial.Get("X-App") != "" {
		t.Error("the initial header was changed")
	}
	if sb.Spilled() || sb.Size() != 5 || sb.Status() != http.StatusCreated || sb.DeclaredSize() != -1 {
		t.Errorf("small: spilled %v, size %d, status %d, declared %d", sb.Spilled(), sb.Size(), sb.Status(), sb.DeclaredSize())
	}
	rec := httptest.NewRecorder()
	if err := sb.WriteTo(rec, false); err != nil || rec.Code != http.StatusCreated || rec.Body.String() != "small" ||
		rec.Header().Get("X-App") != "1" || rec.Header().Get("X-Before") != "1" || rec.Header().Get("Content-Length") != "5" {
		t.Errorf("small sent: %v %d %v %q", err, rec.Code, rec.Header(), rec.Body)
	}
	sb.Close()

	// over the memory limit: in an unnamed file, read back whole
	sb = NewSpillBuffer(nil, 10, 100, dir)
	want := strings.Repeat("0123456789", 5)
	for i := 0; i < len(want); i += 7 {
		if _, err := io.WriteString(sb, want[i:min(i+7, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if !sb.Spilled() || sb.Size() != int64(len(want)) || sb.Status() != http.StatusOK {
		t.Errorf("large: spilled %v, size %d, status %d", sb.Spilled(), sb.Size(), sb.Status())
	}
	got, err := io.ReadAll(sb.Reader())
	if err != nil || string(got) != want {
		t.Errorf("large read back %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the file is named in %s: %v", dir, entries)
	}
	sb.Close()

	// over the size limit, as written or as declared
	sb = NewSpillBuffer(nil, 10, 100, dir)
	if _, err := sb.Write(bytes.Repeat([]byte("x"), 101)); !errors.Is(err, ErrTooLarge) || !sb.TooLarge() {
		t.Errorf("101 bytes: %v", err)
	}
	sb.Close()
	sb = NewSpillBuffer(nil, 10, 100, dir)
	sb.Header().Set("Content-Length", "1000")
	sb.WriteHeader(http.StatusOK)
	if _, err := sb.Write([]byte("x")); !errors.Is(err, ErrTooLarge) || sb.DeclaredSize() != 1000 {
		t.Errorf("declared 1000: %v, declared %d", err, sb.DeclaredSize())
	}
	sb.Close()

	// the file cannot be made: the answer is lost, and said so
	sb = NewSpillBuffer(nil, 10, 100, dir+"/missing")
	if _, err := sb.Write(bytes.Repeat([]byte("x"), 20)); err == nil || sb.Err() == nil {
		t.Errorf("no directory: %v, %v", err, sb.Err())
	}
	sb.Close()
}
