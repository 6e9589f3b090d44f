// Package gctest has test helpers for code that writes in a groupcommit
// Log shared with other writers (the nodes of `txncoord up`).
package gctest

import (
	"path/filepath"
	"testing"

	"github.com/txncoord/txncoord/groupcommit"
)

// Open opens a Log in the test's temporary directory; it is closed when
// the test ends, after whatever was opened in it later (cleanups run last
// first).
func Open(t testing.TB, opts groupcommit.Options) *groupcommit.Log {
	t.Helper()
	l, err := groupcommit.Open(filepath.Join(t.TempDir(), "txncoord.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Space returns the space name of l.
func Space(t testing.TB, l *groupcommit.Log, name string, opts groupcommit.SpaceOptions) *groupcommit.Space {
	t.Helper()
	s, err := l.Space(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Hold keeps the Log's writer busy with an op of s until release is
// called: nothing submitted meanwhile can be durable, and it is all
// committed together afterwards. release fails the test if the op failed.
func Hold(t testing.TB, s *groupcommit.Space) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	done := s.Submit(func(groupcommit.Root) error { <-ch; return nil }, nil)
	return func() {
		t.Helper()
		close(ch)
		if err := <-done; err != nil {
			t.Fatalf("held op: %v", err)
		}
	}
}
