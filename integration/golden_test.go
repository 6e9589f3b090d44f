package integration

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -rewrite refreshes the scenario tables under testdata/ from what the
// suites observed: go test ./integration -run 'TestMatrix|TestLateMarker' -rewrite
// The flag is shared with internal/datadriven when a test of this package
// links it (defining it twice would panic).
func init() {
	if flag.Lookup("rewrite") == nil {
		flag.Bool("rewrite", false, "rewrite testdata/*.txt from the observed results")
	}
}

func rewriting() bool {
	f := flag.Lookup("rewrite")
	return f != nil && f.Value.String() == "true"
}

// goldenTable compares an observed table with testdata/name, a file a
// reviewer reads as the KIP's table; the header comment is kept as is.
// With -rewrite it writes the observed table instead.
func goldenTable(t *testing.T, name, header, observed string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	got := header + observed
	if rewriting() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from what was observed (-rewrite refreshes it):\n--- want\n%s\n--- observed\n%s", path, strings.TrimSpace(string(want)), strings.TrimSpace(got))
	}
}
