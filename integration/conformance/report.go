package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
)

// maxLine bounds the failure-line column; the whole line is in the log.
const maxLine = 150

// report prints the table, one row per test and a column per target, then
// per target "N/M passed", then the verdict on txncoord's column.
func report(w io.Writer, tests []string, targets []string, results map[string]map[string]result, v verdict) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TEST\t%s\tFIRST FAILURE LINE\n", strings.ToUpper(strings.Join(targets, "\t")))
	for _, test := range tests {
		cells := []string{test}
		var why []string
		for _, t := range targets {
			r, ok := results[t][test]
			if !ok {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, r.String())
			if r.first != "" && r.status != statusPass {
				line := r.first
				if len(targets) > 1 {
					line = t + ": " + line
				}
				why = append(why, cut(shortIDs(line)))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", strings.Join(cells, "\t"), strings.Join(why, " | "))
	}
	tw.Flush()

	fmt.Fprintln(w)
	for _, t := range targets {
		var ran, passed, skipped int
		for _, test := range tests {
			r, ok := results[t][test]
			if !ok {
				continue
			}
			ran++
			switch r.status {
			case statusPass:
				passed++
			case statusSkip:
				skipped++
			}
		}
		fmt.Fprintf(w, "%-9s %d/%d passed, %d skipped, %d failed\n", t+":", passed, ran, skipped, ran-passed-skipped)
	}
	if _, ok := results["txncoord"]; !ok {
		return
	}
	fmt.Fprintln(w)
	for _, test := range v.fixed {
		fmt.Fprintf(w, "PASSES NOW: %s; remove it from expectedFailures (integration/conformance/expected.go)\n", test)
	}
	for _, test := range v.stale {
		fmt.Fprintf(w, "STALE: %s is in expectedFailures but is not a broker test of this franz-go\n", test)
	}
	if len(v.expected) > 0 {
		fmt.Fprintf(w, "expected failures (%d): %s\n", len(v.expected), strings.Join(v.expected, " "))
	}
	if v.ok() {
		fmt.Fprintln(w, "CONFORMANCE OK: every txncoord failure is an expected one")
	} else {
		fmt.Fprintf(w, "CONFORMANCE FAILED: %d unexpected txncoord failure(s): %s\n", len(v.unexpected), strings.Join(v.unexpected, " "))
	}
}

// causes groups txncoord's failing tests twice, for the engineers who make
// them pass: by first failure line, and by the APIs each test asked of
// kfake that txncoord does not advertise (served).
func causes(w io.Writer, tests []string, results map[string]map[string]result, served apiSet) {
	byLine := map[string][]string{}
	byAPIs := map[string][]string{}
	for _, test := range tests {
		r, ok := results["txncoord"][test]
		if !ok || r.status == statusPass {
			continue
		}
		line := r.status + ": " + cut(fileLine.ReplaceAllString(shortIDs(r.first), ""))
		byLine[line] = append(byLine[line], test)
		if control, ok := results["kfake"][test]; ok && control.apis != nil && served != nil {
			apis := strings.Join(missing(control.apis, served), " ")
			if apis == "" {
				apis = "(none: txncoord advertises every API the test used on kfake)"
			}
			byAPIs[apis] = append(byAPIs[apis], test)
		}
	}
	if len(byLine) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntxncoord failures by first line:")
	printGroups(w, byLine)
	if len(byAPIs) > 0 {
		fmt.Fprintln(w, "\ntxncoord failures by the APIs they used on kfake that txncoord does not advertise:")
		printGroups(w, byAPIs)
	}
}

// printGroups prints the largest group first.
func printGroups(w io.Writer, groups map[string][]string) {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "  %2d  %s\n      %s\n", len(groups[k]), k, strings.Join(groups[k], " "))
	}
}

// fileLine is the "x_test.go:12: " before a test's message.
var fileLine = regexp.MustCompile(`^\w+_test\.go:\d+: `)

// hexID is a generated topic or group name: kgo's tests name them with
// random hex, which would make every failure line unique.
var hexID = regexp.MustCompile(`[0-9a-f]{16,}`)

func shortIDs(s string) string { return hexID.ReplaceAllString(s, "<id>") }

func cut(s string) string {
	if len(s) <= maxLine {
		return s
	}
	return s[:maxLine-3] + "..."
}
