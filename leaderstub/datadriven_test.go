package leaderstub

import (
	"fmt"
	"testing"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// The scenarios are internal/datadriven files whose cases have no input
// lines:
//
//	# comments
//	command arg=value flag
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Each command runs in order against one fixture;
// go test ./leaderstub -run TestDataDriven -args -rewrite refreshes the
// expected output in place.

// ddCmd is one command of a scenario (Name is its first word).
type ddCmd struct {
	*datadriven.Case
	Name string
}

func (d *ddCmd) has(key string) bool { return d.Has(key) }

func (d *ddCmd) str(key, def string) string { return d.Arg(key, def) }

func (d *ddCmd) int(t *testing.T, key string, def int64) int64 {
	v, ok := d.Args[key]
	if !ok {
		return def
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil {
		t.Fatalf("%s: %s=%q is not a number", d.Pos, key, v)
	}
	return n
}

func runDataDriven(t *testing.T, path string, run func(t *testing.T, d *ddCmd) string) {
	t.Helper()
	datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
		if len(c.Input) > 0 {
			t.Fatalf("%s: expected ---- after the command", c.Pos)
		}
		return run(t, &ddCmd{Case: c, Name: c.Cmd})
	})
}
