package security

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/datadriven"
	"github.com/txncoord/txncoord/wire"
)

// TestDataDriven replays testdata/*.txt (internal/datadriven; -args -rewrite
// refreshes the expected outputs). Commands:
//
//	credentials: the input is a credentials file (YAML, users omitted)
//	authorize: each input line "principal operation resource-type name"
//	  is answered "allow" or "deny"
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		var creds *Credentials
		datadriven.RunFile(t, path, func(t *testing.T, b *datadriven.Case) string {
			var got []string
			switch b.Line {
			case "credentials":
				tmp := filepath.Join(t.TempDir(), "credentials.yaml")
				os.WriteFile(tmp, []byte(strings.Join(b.Input, "\n")), 0o600)
				var err error
				creds, err = Load(tmp)
				if err != nil {
					got = []string{"error: " + strings.ReplaceAll(err.Error(), tmp+": ", "")}
				} else {
					got = []string{"ok"}
				}
			case "authorize":
				for _, l := range b.Input {
					f := strings.Fields(l)
					if len(f) != 4 {
						t.Fatalf("%s: want principal op resource name: %q", b.Pos, l)
					}
					op, err1 := kmsg.ParseACLOperation(f[1])
					rt, err2 := kmsg.ParseACLResourceType(f[2])
					if err1 != nil || err2 != nil {
						t.Fatalf("%s: %v %v", b.Pos, err1, err2)
					}
					verdict := "deny"
					if creds.Authorizer().Authorize(f[0], op, wire.Resource{Type: rt, Name: f[3]}) {
						verdict = "allow"
					}
					got = append(got, fmt.Sprintf("%-45s %s", l, verdict))
				}
			default:
				t.Fatalf("%s: unknown command %q", b.Pos, b.Line)
			}
			return strings.Join(got, "\n")
		})
	})
}
