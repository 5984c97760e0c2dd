package names

import "testing"

type color int

func TestOf(t *testing.T) {
	table := []string{"red", "green"}
	for v, want := range map[color]string{0: "red", 1: "green", 2: "color 2", -1: "color -1"} {
		if got := Of(table, v, "color"); got != want {
			t.Errorf("Of(%d) = %q, want %q", v, got, want)
		}
	}
}
