package bench

import (
	"strings"
	"testing"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// scenario is a case of a testdata file (format: internal/datadriven) as
// TestDataDriven sees it. go test ./bench -run TestDataDriven -args -rewrite
// refreshes the expected outputs from the code.
type scenario struct {
	pos     string
	command string
	args    map[string]string
	input   string // the input lines, joined
}

func (s scenario) arg(t *testing.T, key string) string {
	v, ok := s.args[key]
	if !ok {
		t.Fatalf("%s: %s needs %s=", s.pos, s.command, key)
	}
	return v
}

// runDataDriven replays every scenario of path through run, comparing (or,
// with -rewrite, replacing) the expected output.
func runDataDriven(t *testing.T, path string, run func(t *testing.T, s scenario) string) {
	datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
		return run(t, scenario{pos: c.Pos, command: c.Cmd, args: c.Args, input: strings.Join(c.Input, "\n")})
	})
}
