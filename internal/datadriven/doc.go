// Package datadriven is the one data-driven test runner of this module (after
// etcd raft's datadriven), imported only by tests.
//
// A scenario file (testdata/*.txt) is a list of cases:
//
//	# comments and blank lines between cases
//	command key=value flag ...
//	input lines (optional, may hold blank lines and #)
//	----
//	expected output (ends at the first blank line)
//
// RunFile replays one file, Walk every file matching a pattern, each as a
// subtest. Run a package's tests with -args -rewrite to store the current
// outputs as the expected ones instead of comparing; everything else of the
// file (comments, blank lines, command and input lines) is kept verbatim, so
// a rewrite of unchanged outputs leaves the file byte-identical.
package datadriven
