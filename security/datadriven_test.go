package security

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/wire"
)

// go test ./security -run TestDataDriven -rewrite refreshes the expected
// output of testdata/*.txt from the code.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// A scenario file is a list of blocks separated by blank lines (lines
// starting with # are comments):
//
//	command arg=value ...
//	input lines
//	----
//	expected output lines
type ddBlock struct {
	comment []string
	command string
	input   []string
	want    []string
	line    int
}

func parseBlocks(t *testing.T, text string) []ddBlock {
	t.Helper()
	var blocks []ddBlock
	var comment []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		switch line := lines[i]; {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#"):
			comment = append(comment, line)
			continue
		}
		b := ddBlock{comment: comment, command: lines[i], line: i + 1}
		comment = nil
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			b.input = append(b.input, lines[i])
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			b.want = append(b.want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks
}

func formatBlocks(blocks []ddBlock) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n")
		}
		for _, l := range append(append(append([]string{}, b.comment...), b.command), b.input...) {
			sb.WriteString(l + "\n")
		}
		sb.WriteString("----\n")
		for _, l := range b.want {
			sb.WriteString(l + "\n")
		}
	}
	return sb.String()
}

// TestDataDriven replays testdata/*.txt. Commands:
//
//	credentials: the input is a credentials file (YAML, users omitted)
//	authorize: each input line "principal operation resource-type name"
//	  is answered "allow" or "deny"
func TestDataDriven(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			blocks := parseBlocks(t, string(raw))
			var creds *Credentials
			for i := range blocks {
				b := &blocks[i]
				var got []string
				switch b.command {
				case "credentials":
					tmp := filepath.Join(t.TempDir(), "credentials.yaml")
					os.WriteFile(tmp, []byte(strings.Join(b.input, "\n")), 0o600)
					creds, err = Load(tmp)
					if err != nil {
						got = []string{"error: " + strings.ReplaceAll(err.Error(), tmp+": ", "")}
					} else {
						got = []string{"ok"}
					}
				case "authorize":
					for _, l := range b.input {
						f := strings.Fields(l)
						if len(f) != 4 {
							t.Fatalf("%s:%d: want principal op resource name: %q", path, b.line, l)
						}
						op, err1 := kmsg.ParseACLOperation(f[1])
						rt, err2 := kmsg.ParseACLResourceType(f[2])
						if err1 != nil || err2 != nil {
							t.Fatalf("%s:%d: %v %v", path, b.line, err1, err2)
						}
						verdict := "deny"
						if creds.Authorizer().Authorize(f[0], op, wire.Resource{Type: rt, Name: f[3]}) {
							verdict = "allow"
						}
						got = append(got, fmt.Sprintf("%-45s %s", l, verdict))
					}
				default:
					t.Fatalf("%s:%d: unknown command %q", path, b.line, b.command)
				}
				if *rewrite {
					b.want = got
				} else if strings.Join(got, "\n") != strings.Join(b.want, "\n") {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, b.line, b.command, strings.Join(got, "\n"), strings.Join(b.want, "\n"))
				}
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(formatBlocks(blocks)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
