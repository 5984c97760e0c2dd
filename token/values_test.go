package token

import (
	"sync"
	"testing"
	"unsafe"
)

// TestValueChunksNeverHandOutAValueTwice takes values from many goroutines
// at once, writes each, and checks no value was handed to two takers and
// none can be grown into its neighbour.
func TestValueChunksNeverHandOutAValueTwice(t *testing.T) {
	var c valueChunks
	const takers, takes, n = 8, 500, 3
	got := make([][][]string, takers)
	var wg sync.WaitGroup
	for g := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range takes {
				v := c.take(n)
				if len(v) != n || cap(v) != n {
					t.Errorf("take(%d): len %d cap %d", n, len(v), cap(v))
					return
				}
				for i := range v {
					if v[i] != "" {
						t.Errorf("a value handed out holds %q", v[i])
					}
					v[i] = "taken"
				}
				got[g] = append(got[g], v)
			}
		}()
	}
	wg.Wait()
	seen := map[*string]bool{}
	for _, vs := range got {
		for _, v := range vs {
			for i := range v {
				p := &v[i]
				if seen[p] {
					t.Fatalf("the value at %p was handed out twice", unsafe.Pointer(p))
				}
				seen[p] = true
			}
		}
	}
	if len(seen) != takers*takes*n {
		t.Fatalf("%d values, want %d", len(seen), takers*takes*n)
	}
}

func TestValueChunksTakeMany(t *testing.T) {
	var c valueChunks
	v := c.take(valuesPerChunk + 1)
	if len(v) != valuesPerChunk+1 {
		t.Fatalf("len %d", len(v))
	}
	if w := c.take(1); len(w) != 1 || &w[0] == &v[0] {
		t.Fatal("a small take after a large one")
	}
}
