package testkit

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// rewrite refreshes the expected output of every data-driven case instead of
// comparing it: go test ./negotiation/... -args -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt expected outputs")

// Case is one data-driven case: a command line, optional input lines, and
// the expected output after a "----" line. A blank line ends the output, so
// outputs never contain blank lines.
type Case struct {
	Pos     string // file:line, for failure messages
	Cmd     string
	Args    map[string]string
	Input   []string
	want    string
	header  []string // comments and blank lines kept verbatim on rewrite
	cmdLine string
}

// Arg returns an argument, or def when absent.
func (c *Case) Arg(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// RunFile replays every case of path through fn and compares fn's output to
// the expected one; with -rewrite it writes fn's outputs back to the file.
func RunFile(t *testing.T, path string, fn func(t *testing.T, c *Case) string) {
	t.Helper()
	cases, trailer, err := parseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(fn(t, c), "\n")
		if *rewrite {
			for _, h := range c.header {
				out.WriteString(h + "\n")
			}
			out.WriteString(c.cmdLine + "\n")
			for _, in := range c.Input {
				out.WriteString(in + "\n")
			}
			out.WriteString("----\n" + got + "\n")
			continue
		}
		if got != c.want {
			t.Errorf("%s: %s\n--- got\n%s\n--- want\n%s", c.Pos, c.cmdLine, got, c.want)
		}
	}
	if *rewrite {
		for _, h := range trailer {
			out.WriteString(h + "\n")
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parseFile(path string) (cases []*Case, trailer []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lineNo := 0
	var header []string
	var cur *Case
	state := 0 // 0 header, 1 input, 2 output
	var want []string
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
			cur = &Case{Pos: fmt.Sprintf("%s:%d", path, lineNo), cmdLine: line, header: header, Args: map[string]string{}}
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
	if state == 1 {
		return nil, nil, fmt.Errorf("%s: case without ---- line", cur.Pos)
	}
	flush()
	return cases, header, sc.Err()
}
