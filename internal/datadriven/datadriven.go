package datadriven

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite refreshes the expected outputs instead of comparing them:
// go test ./pkg -run TestX -args -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// Case is one data-driven case: a command line, optional input lines, and
// the expected output after a "----" line. A blank line ends the output, so
// outputs never contain blank lines.
type Case struct {
	Pos   string            // file:line of the command line, for failure messages
	Line  string            // the command line verbatim (for positional arguments)
	Cmd   string            // its first word
	Args  map[string]string // its key=value words; a bare word is a key with value ""
	Input []string          // the lines between the command and "----"

	want   string
	header []string // comments and blank lines before the case, kept verbatim on rewrite
}

// Arg returns an argument, or def when absent.
func (c *Case) Arg(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// Has reports whether the command line has the argument (or bare word) key.
func (c *Case) Has(key string) bool {
	_, ok := c.Args[key]
	return ok
}

// Walk runs fn on every file matching pattern (e.g. "testdata/*.txt"), each
// in a subtest named after the file; fn typically sets up a fixture and
// calls RunFile. No matching file is a failure.
func Walk(t *testing.T, pattern string, fn func(t *testing.T, path string)) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files match %s: %v", pattern, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { fn(t, path) })
	}
}

// RunFile replays every case of path, in order, through fn and compares fn's
// output (trailing newlines trimmed) to the expected one; with -rewrite it
// writes fn's outputs back to the file instead.
func RunFile(t *testing.T, path string, fn func(t *testing.T, c *Case) string) {
	t.Helper()
	cases, trailer, err := parseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(fn(t, c), "\n")
		if *rewrite {
			if blankLine(got) {
				t.Fatalf("%s: %s: output has a blank line, cannot be stored:\n%s", c.Pos, c.Line, got)
			}
			for _, l := range c.header {
				out.WriteString(l + "\n")
			}
			out.WriteString(c.Line + "\n")
			for _, l := range c.Input {
				out.WriteString(l + "\n")
			}
			out.WriteString("----\n")
			if got != "" {
				out.WriteString(got + "\n")
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: %s\n--- got\n%s\n--- want\n%s", c.Pos, c.Line, got, c.want)
		}
	}
	if *rewrite {
		for _, l := range trailer {
			out.WriteString(l + "\n")
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// blankLine reports whether a non-empty output has a line that would end it.
func blankLine(s string) bool {
	if s == "" {
		return false
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" {
			return true
		}
	}
	return false
}

// parseFile returns the cases of path and the comment and blank lines after
// the last one.
func parseFile(path string) (cases []*Case, trailer []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lineNo := 0
	var header, want []string
	var cur *Case
	state := 0 // 0 between cases, 1 input, 2 output
	flush := func() {
		if cur != nil {
			cur.want = strings.Join(want, "\n")
			cases = append(cases, cur)
			cur, want = nil, nil
		}
	}
	for sc.Scan() {
		line := sc.Text()
		lineNo++
		switch state {
		case 0:
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				header = append(header, line)
				continue
			}
			if line == "----" {
				return nil, nil, fmt.Errorf("%s:%d: ---- without a command", path, lineNo)
			}
			cur = &Case{Pos: fmt.Sprintf("%s:%d", path, lineNo), Line: line, header: header, Args: map[string]string{}}
			header = nil
			fields := strings.Fields(line)
			cur.Cmd = fields[0]
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				cur.Args[k] = v
			}
			state = 1
		case 1:
			if line == "----" {
				state = 2
				continue
			}
			cur.Input = append(cur.Input, line)
		case 2:
			if strings.TrimSpace(line) == "" {
				flush()
				header = append(header, line)
				state = 0
				continue
			}
			want = append(want, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if state == 1 {
		return nil, nil, fmt.Errorf("%s: case without ---- line", cur.Pos)
	}
	flush()
	return cases, header, nil
}
