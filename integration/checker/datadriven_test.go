package checker_test

import (
	"testing"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// runScenarios replays every testdata/*.txt file (format:
// internal/datadriven) through run, which gets a case's lines up to "----"
// (the command line first), comparing or, with
// go test ./integration/checker -run TestScenarios -args -rewrite,
// replacing the expected output.
func runScenarios(t *testing.T, run func(t *testing.T, input []string) string) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			return run(t, append([]string{c.Line}, c.Input...))
		})
	})
}
