package leaderstub

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A tiny data-driven runner in the style of etcd raft's datadriven: a file
// is a list of blocks
//
//	# comments
//	command arg=value flag
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Each command runs in order against one fixture; -rewrite refreshes the
// expected output in place.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

type ddCmd struct {
	Pos  string
	Name string
	Args map[string]string
	Line string
}

func (d *ddCmd) has(key string) bool { _, ok := d.Args[key]; return ok }

func (d *ddCmd) str(key, def string) string {
	if v, ok := d.Args[key]; ok {
		return v
	}
	return def
}

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
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			i++
			continue
		}
		d := &ddCmd{Pos: fmt.Sprintf("%s:%d", path, i+1), Line: line, Args: map[string]string{}}
		fields := strings.Fields(line)
		d.Name = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			d.Args[k] = v
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: expected ---- after the command", d.Pos)
		}
		i++
		var want []string
		for i < len(lines) && lines[i] != "" {
			want = append(want, lines[i])
			i++
		}
		got := strings.TrimRight(run(t, d), "\n")
		if *rewrite {
			out.WriteString(line + "\n----\n" + got + "\n")
			continue
		}
		if w := strings.Join(want, "\n"); got != w {
			t.Errorf("%s: %s\nwant:\n%s\ngot:\n%s", d.Pos, line, w, got)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
