package datadriven

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sample has every format feature: a leading comment block, several blank
// lines between cases, comments right before a command, a bare-word
// argument, input with a blank line and a "#" line, an empty output, and a
// trailing comment after the last case.
const sample = `# header comment

# about echo
echo a=1 b=two flag
x
# not a comment: input

y
----
a=1 b=two
x|#...|y


sum
----

# Indented comments are comments too.
   # indented
echo
----
a= b=

# trailing comment
`

// echo renders a case so the expected outputs of sample are its own.
func echo(t *testing.T, c *Case) string {
	switch c.Cmd {
	case "echo":
		in := strings.Join(c.Input, "|")
		if len(c.Input) > 0 {
			in = strings.ReplaceAll(in, "# not a comment: input", "#...")
		}
		return "a=" + c.Arg("a", "") + " b=" + c.Arg("b", "") + "\n" + strings.ReplaceAll(in, "||", "|") + "\n"
	case "sum":
		return ""
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func writeSample(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "sample.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func setRewrite(t *testing.T, on bool) {
	old := *rewrite
	*rewrite = on
	t.Cleanup(func() { *rewrite = old })
}

func TestParse(t *testing.T) {
	path := writeSample(t, sample)
	cases, trailer, err := parseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3 {
		t.Fatalf("%d cases, want 3", len(cases))
	}
	c := cases[0]
	if c.Pos != path+":4" || c.Line != "echo a=1 b=two flag" || c.Cmd != "echo" {
		t.Errorf("case 0: pos %q line %q cmd %q", c.Pos, c.Line, c.Cmd)
	}
	if want := map[string]string{"a": "1", "b": "two", "flag": ""}; !reflect.DeepEqual(c.Args, want) {
		t.Errorf("args %v, want %v", c.Args, want)
	}
	if !c.Has("flag") || c.Has("x") || c.Arg("b", "?") != "two" || c.Arg("x", "?") != "?" {
		t.Errorf("Has/Arg disagree with %v", c.Args)
	}
	if want := []string{"x", "# not a comment: input", "", "y"}; !reflect.DeepEqual(c.Input, want) {
		t.Errorf("input %q, want %q", c.Input, want)
	}
	if c.want != "a=1 b=two\nx|#...|y" {
		t.Errorf("want %q", c.want)
	}
	if want := []string{"# header comment", "", "# about echo"}; !reflect.DeepEqual(c.header, want) {
		t.Errorf("header %q, want %q", c.header, want)
	}
	if cases[1].Cmd != "sum" || cases[1].want != "" || len(cases[1].Input) != 0 {
		t.Errorf("case 1: %+v", cases[1])
	}
	if want := []string{"", "# Indented comments are comments too.", "   # indented"}; !reflect.DeepEqual(cases[2].header, want) {
		t.Errorf("case 2 header %q, want %q", cases[2].header, want)
	}
	if want := []string{"", "# trailing comment"}; !reflect.DeepEqual(trailer, want) {
		t.Errorf("trailer %q, want %q", trailer, want)
	}

	for _, bad := range []string{"cmd\ninput\n", "----\nout\n"} {
		if _, _, err := parseFile(writeSample(t, bad)); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}

func TestRunFileCompares(t *testing.T) {
	setRewrite(t, false)
	var cmds []string
	RunFile(t, writeSample(t, sample), func(t *testing.T, c *Case) string {
		cmds = append(cmds, c.Cmd)
		return echo(t, c)
	})
	if want := []string{"echo", "sum", "echo"}; !reflect.DeepEqual(cmds, want) {
		t.Errorf("ran %v, want %v", cmds, want)
	}
}

// TestRewriteRoundTrip: a rewrite of unchanged outputs leaves the file
// byte-identical; a rewrite of changed outputs replaces only the outputs.
func TestRewriteRoundTrip(t *testing.T) {
	setRewrite(t, true)
	path := writeSample(t, sample)
	RunFile(t, path, echo)
	if got, _ := os.ReadFile(path); string(got) != sample {
		t.Fatalf("rewrite of unchanged outputs changed the file:\n%s", got)
	}

	RunFile(t, path, func(t *testing.T, c *Case) string {
		if c.Cmd == "sum" {
			return "3"
		}
		return strings.ToUpper(echo(t, c))
	})
	want := strings.Replace(sample, "a=1 b=two\nx|#...|y\n", "A=1 B=TWO\nX|#...|Y\n", 1)
	want = strings.Replace(want, "sum\n----\n", "sum\n----\n3\n", 1)
	want = strings.Replace(want, "----\na= b=\n", "----\nA= B=\n", 1)
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}

	// And the rewritten file compares clean against the new outputs.
	setRewrite(t, false)
	RunFile(t, path, func(t *testing.T, c *Case) string {
		if c.Cmd == "sum" {
			return "3"
		}
		return strings.ToUpper(echo(t, c))
	})
}

func TestWalk(t *testing.T) {
	setRewrite(t, false)
	dir := t.TempDir()
	for _, name := range []string{"b.txt", "a.txt", "skip.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("sum\n----\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	Walk(t, filepath.Join(dir, "*.txt"), func(t *testing.T, path string) {
		files = append(files, filepath.Base(path)+"@"+t.Name())
		RunFile(t, path, echo)
	})
	if want := []string{"a.txt@TestWalk/a.txt", "b.txt@TestWalk/b.txt"}; !reflect.DeepEqual(files, want) {
		t.Errorf("walked %v, want %v", files, want)
	}
}
