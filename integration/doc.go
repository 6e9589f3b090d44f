// Package integration holds the end-to-end suites: real clients against
// coordinator and leaders on loopback, mixed versions, a fault-injecting
// proxy and a history checker.
//
// harness.go starts an in-process cluster (Options.Proxied puts a
// faultproxy in front of chosen leaders); procs_test.go runs coordinator
// and leaders as separate txncoord processes for SIGKILL crash tests.
// Suites: matrix_test.go (coordinator × leaders × client versions,
// testdata/matrix.txt), late_marker_test.go (late and duplicate
// WriteTxnMarkers, testdata/late_marker.txt), crash_test.go (SIGKILL and the
// old coordinator's fenced marker), soak_test.go (TXNCOORD_SOAK=1, make
// soak). interop/run.sh checks kcat and KafkaJS (make interop).
package integration
