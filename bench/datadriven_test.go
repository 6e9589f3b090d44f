package bench

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite refreshes the expected output of testdata/*.txt from the code:
// go test ./bench -run TestDataDriven -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations")

// scenario is one block of a testdata file:
//
//	command key=value ...
//	input lines
//	----
//	expected output
//	(blank line)
type scenario struct {
	pos      string
	command  string
	args     map[string]string
	input    string
	expected string
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
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var scenarios []scenario
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	for {
		text, ok := next()
		if !ok {
			break
		}
		if text == "" || strings.HasPrefix(text, "#") {
			out.WriteString(text + "\n")
			continue
		}
		header := text
		fields := strings.Fields(header)
		s := scenario{pos: fmt.Sprintf("%s:%d", filepath.Base(path), line), command: fields[0], args: map[string]string{}}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			s.args[k] = v
		}
		var input, expected []string
		for text, ok = next(); ok && text != "----"; text, ok = next() {
			input = append(input, text)
		}
		for text, ok = next(); ok && text != ""; text, ok = next() {
			expected = append(expected, text)
		}
		s.input, s.expected = strings.Join(input, "\n"), strings.Join(expected, "\n")
		scenarios = append(scenarios, s)
		got := strings.TrimRight(run(t, s), "\n")
		if !*rewrite && got != s.expected {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", s.pos, header, got, s.expected)
		}
		out.WriteString(strings.Join(fields, " ") + "\n")
		if s.input != "" {
			out.WriteString(s.input + "\n")
		}
		out.WriteString("----\n" + got + "\n\n")
	}
	if len(scenarios) == 0 {
		t.Fatalf("%s: no scenarios", path)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
