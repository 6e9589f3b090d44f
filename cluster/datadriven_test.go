package cluster

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite refreshes the expected output of testdata/*.txt from the code:
// go test ./cluster -run TestDataDriven -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// A scenario file is a list of cases separated by blank lines; lines
// starting with # between cases are comments. Each case is
//
//	command arg=value ...
//	input lines (no blank lines)
//	----
//	expected output lines
type ddCase struct {
	comment []string
	command string
	args    map[string]string
	input   string
	want    string
	line    int
}

func parseScenario(t *testing.T, path string) []ddCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []ddCase
	var comment []string
	lines := strings.Split(string(raw), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#"):
			comment = append(comment, line)
			continue
		}
		c := ddCase{comment: comment, line: i + 1, args: map[string]string{}}
		comment = nil
		fields := strings.Fields(line)
		c.command = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args[k] = v
		}
		var in, out []string
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			in = append(in, lines[i])
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, lines[i])
		}
		c.input, c.want = strings.Join(in, "\n"), strings.Join(out, "\n")
		cases = append(cases, c)
	}
	return cases
}

func formatScenario(cases []ddCase) string {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, l := range c.comment {
			b.WriteString(l + "\n")
		}
		b.WriteString(c.command)
		for _, k := range sortedKeys(c.args) {
			b.WriteString(" " + k + "=" + c.args[k])
		}
		b.WriteString("\n")
		if c.input != "" {
			b.WriteString(c.input + "\n")
		}
		b.WriteString("----\n" + c.want + "\n")
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// runScenarios replays every testdata/*.txt through run, which returns a
// case's output; with -rewrite it stores the outputs instead of comparing.
func runScenarios(t *testing.T, run func(t *testing.T, c ddCase) string) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases := parseScenario(t, path)
			for i := range cases {
				c := &cases[i]
				got := strings.TrimRight(run(t, *c), "\n")
				if *rewrite {
					c.want = got
					continue
				}
				if got != c.want {
					t.Errorf("%s:%d: %s\n%s\n---- got\n%s\n---- want\n%s", path, c.line, c.command, c.input, got, c.want)
				}
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(formatScenario(cases)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
