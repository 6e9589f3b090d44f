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
