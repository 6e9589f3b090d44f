package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
)

// seedHelper is the function in pkg/kgo's helpers_test.go that reads
// KGO_SEEDS; every test that talks to a broker reaches it through
// newTestClient, testClientOpts or adm.
const seedHelper = "getSeedBrokers"

// discoverBrokerTests returns, sorted, the Test functions of the package in
// dir whose bodies reach seedHelper, directly or through other functions of
// the package's test files. Functions and methods are matched by name only,
// so the answer can include a test that merely shares a helper's name; for
// pkg/kgo it is exactly the tests that dial KGO_SEEDS (checked by
// TestDiscoverKgo).
func discoverBrokerTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no test files in %s", dir)
	}
	// uses[f] is every name f's body mentions: calls, and functions passed
	// as values (t.Run(name, helper)) alike.
	uses := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			names := uses[fn.Name.Name]
			if names == nil {
				names = map[string]bool{}
				uses[fn.Name.Name] = names
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					names[id.Name] = true
				}
				return true
			})
		}
	}
	if _, ok := uses[seedHelper]; !ok {
		return nil, fmt.Errorf("%s: no function %s (has franz-go's test layout changed?)", dir, seedHelper)
	}
	reaches := map[string]bool{seedHelper: true}
	for changed := true; changed; {
		changed = false
		for fn, names := range uses {
			if reaches[fn] {
				continue
			}
			for name := range names {
				if reaches[name] {
					reaches[fn], changed = true, true
					break
				}
			}
		}
	}
	var tests []string
	for fn := range reaches {
		if strings.HasPrefix(fn, "Test") {
			tests = append(tests, fn)
		}
	}
	sort.Strings(tests)
	return tests, nil
}
