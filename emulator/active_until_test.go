package emulator

import (
	"testing"
	"time"
)

func TestParseActiveUntil(t *testing.T) {
	want := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, in := range []string{"2030-01-01 00:00:00", "2030-01-01", "2030-01-01T02:00:00+02:00"} {
		got, err := ParseActiveUntil(in)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseActiveUntil("01/01/2030"); err == nil {
		t.Error("accepted 01/01/2030")
	}
}
