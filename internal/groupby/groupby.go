// Package groupby groups values by key, keeping the keys in the order they
// were first seen: Kafka requests and responses list a topic once with all
// its partitions, and answers follow the request's order.
package groupby

import "iter"

// Ordered is values grouped by key, keys in first-seen order. The zero
// value is empty and ready to use.
type Ordered[K comparable, V any] struct {
	keys   []K
	values [][]V
	index  map[K]int // built once there are more than linearKeys keys
}

// linearKeys is how many keys are found by a scan before an index map is
// built: most requests name one or two topics, and a map per request was
// a measurable share of the commit path's allocations.
const linearKeys = 8

// Add appends vs to k's group, making k the last key if it is new (even
// when vs is empty).
func (g *Ordered[K, V]) Add(k K, vs ...V) {
	i, ok := g.find(k)
	if !ok {
		i = len(g.keys)
		g.keys = append(g.keys, k)
		g.values = append(g.values, nil)
		switch {
		case g.index != nil:
			g.index[k] = i
		case len(g.keys) > linearKeys:
			g.index = make(map[K]int, 2*len(g.keys))
			for j, key := range g.keys {
				g.index[key] = j
			}
		}
	}
	g.values[i] = append(g.values[i], vs...)
}

func (g *Ordered[K, V]) find(k K) (int, bool) {
	if g.index != nil {
		i, ok := g.index[k]
		return i, ok
	}
	for i, key := range g.keys {
		if key == k {
			return i, true
		}
	}
	return 0, false
}

// Len is the number of keys.
func (g *Ordered[K, V]) Len() int { return len(g.keys) }

// All yields each key with its values, keys in first-seen order.
func (g *Ordered[K, V]) All() iter.Seq2[K, []V] {
	return func(yield func(K, []V) bool) {
		for i, k := range g.keys {
			if !yield(k, g.values[i]) {
				return
			}
		}
	}
}

// Group is the i-th key (0 ≤ i < Len) with its values: a loop over
// indexes allocates nothing where a range over All may (its yield
// closure escapes when the loop body is not inlined).
func (g *Ordered[K, V]) Group(i int) (K, []V) { return g.keys[i], g.values[i] }
