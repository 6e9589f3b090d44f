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
	index  map[K]int
}

// Add appends vs to k's group, making k the last key if it is new (even
// when vs is empty).
func (g *Ordered[K, V]) Add(k K, vs ...V) {
	i, ok := g.index[k]
	if !ok {
		if g.index == nil {
			g.index = map[K]int{}
		}
		i = len(g.keys)
		g.index[k] = i
		g.keys = append(g.keys, k)
		g.values = append(g.values, nil)
	}
	g.values[i] = append(g.values[i], vs...)
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
