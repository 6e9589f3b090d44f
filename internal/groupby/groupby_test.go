package groupby

import (
	"slices"
	"testing"
)

func TestOrdered(t *testing.T) {
	var g Ordered[string, int32]
	g.Add("b", 1)
	g.Add("a")
	g.Add("b", 0, 2)
	g.Add("c", 5)
	var keys []string
	var vals [][]int32
	for k, vs := range g.All() {
		keys = append(keys, k)
		vals = append(vals, vs)
	}
	if !slices.Equal(keys, []string{"b", "a", "c"}) || g.Len() != 3 {
		t.Fatalf("keys %v (len %d)", keys, g.Len())
	}
	if !slices.Equal(vals[0], []int32{1, 0, 2}) || vals[1] != nil || !slices.Equal(vals[2], []int32{5}) {
		t.Fatalf("values %v", vals)
	}
	for range g.All() {
		break // stopping early is allowed
	}
}

// TestOrderedManyKeys crosses from the scan to the index map: keys stay
// in first-seen order and every value lands in its key's group.
func TestOrderedManyKeys(t *testing.T) {
	var g Ordered[int, int]
	const keys = 3 * linearKeys
	for round := range 3 {
		for k := keys - 1; k >= 0; k-- { // descending, so order is not sorted order
			g.Add(k, k*10+round)
		}
	}
	if g.Len() != keys {
		t.Fatalf("%d keys, want %d", g.Len(), keys)
	}
	want := keys - 1
	for k, vs := range g.All() {
		if k != want {
			t.Fatalf("key %d where %d was first seen", k, want)
		}
		if !slices.Equal(vs, []int{k * 10, k*10 + 1, k*10 + 2}) {
			t.Fatalf("key %d: values %v", k, vs)
		}
		want--
	}
}

func BenchmarkOrderedOneTopic(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var g Ordered[string, int32]
		g.Add("orders", 0)
		g.Add("orders", 1)
	}
}
