package main

import "sort"

// shareGroupTests are the KIP-932 share-group tests. They skip when the
// cluster does not advertise ShareFetch and ShareAcknowledge v2; txncoord
// serves share groups, so they must pass like any other: a skip is an
// unexpected outcome.
var shareGroupTests = map[string]bool{
	"TestShareGroup":                     true,
	"TestShareGroupAckOnClose":           true,
	"TestShareGroupETL":                  true,
	"TestShareGroupOffsetsAdmin":         true,
	"TestConsumeRegexShareSkipsInternal": true,
}

// expectedFailures are the broker tests that fail or skip against txncoord
// today, each with why. A test listed here may fail without failing the
// run; remove its entry in the commit that makes it pass (the run prints
// the entries that passed). Keep the README's conformance section in step.
//
// As of 2026-12-02 (franz-go v1.22.3): 36/36 pass, the 5 share-group
// tests included; none is expected to fail or skip. (History: 6/36 before
// topic administration, 26/36 before the group coordinator, 31/36 with
// the share-group tests skipping before share groups.)
var expectedFailures = map[string]string{}

// A verdict is the run's judgment of the txncoord column.
type verdict struct {
	unexpected []string // failed or skipped, and not expected to
	expected   []string // failed as listed
	fixed      []string // listed but passed: the entry can go
	stale      []string // listed but not a broker test of this franz-go
}

func judge(tests []string, got map[string]result) verdict {
	var v verdict
	known := map[string]bool{}
	for _, test := range tests {
		known[test] = true
		r, ok := got[test]
		if !ok {
			continue // not run (--run)
		}
		_, listed := expectedFailures[test]
		switch {
		case r.status == statusPass && listed:
			v.fixed = append(v.fixed, test)
		case r.status == statusPass:
		case listed:
			v.expected = append(v.expected, test)
		default:
			v.unexpected = append(v.unexpected, test)
		}
	}
	for test := range expectedFailures {
		if !known[test] {
			v.stale = append(v.stale, test)
		}
	}
	sort.Strings(v.stale)
	return v
}

func (v verdict) ok() bool { return len(v.unexpected) == 0 }
