package cluster

import (
	"strconv"
	"strings"
	"testing"

	"github.com/txncoord/txncoord/internal/datadriven"
)

// ddCase is a case of testdata/*.txt (format: internal/datadriven) as the
// scenarios see it. go test ./cluster -run TestDataDriven -args -rewrite
// refreshes the expected outputs from the code.
type ddCase struct {
	command string
	args    map[string]string
	input   string // the input lines, joined
	line    int    // of the command
}

// runScenarios replays every testdata/*.txt through run, which returns a
// case's output.
func runScenarios(t *testing.T, run func(t *testing.T, c ddCase) string) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		datadriven.RunFile(t, path, func(t *testing.T, c *datadriven.Case) string {
			line, _ := strconv.Atoi(c.Pos[strings.LastIndex(c.Pos, ":")+1:])
			return run(t, ddCase{command: c.Cmd, args: c.Args, input: strings.Join(c.Input, "\n"), line: line})
		})
	})
}
