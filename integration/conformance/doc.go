// Command conformance runs franz-go's own integration tests (pkg/kgo, the
// tests that read KGO_SEEDS) unmodified against txncoord and, as the
// control, against franz-go's kfake, and prints one table with both
// columns: `make conformance`.
//
// The Makefile builds the three pieces it needs: bin/txncoord,
// bin/kgo.test (go test -c of franz-go's pkg/kgo from the module cache, at
// the version in go.mod) and this program. Then, for each test and target:
//
//   - a fresh server: `txncoord up` with its own data dir and free ports, or
//     this program's serve-kfake child (kfake.NewCluster with three brokers,
//     configured as franz-go's CI runs kfake);
//   - `kgo.test -test.run '^Name$'` with KGO_SEEDS pointing at it,
//     KGO_TEST_RF=1 (one replica, as franz-go's CI against kfake) and
//     KGO_TEST_RECORDS (fewer records for the ETL tests than the default
//     500,000, to keep CI under its time budget), under a per-test timeout;
//   - the result, its duration and the first failure line of its output.
//
// The broker tests are found by reading pkg/kgo's test files (discover.go):
// every Test function that reaches getSeedBrokers, the helper that reads
// KGO_SEEDS. For franz-go v1.22.3 that is 36 tests.
//
// Verdict (expected.go): the run fails when a test outside the
// expected-failure list fails or skips against txncoord. Each entry names
// why it fails today; the list shrinks as txncoord gains the features. A
// skip counts as a failure: the five share-group tests (KIP-932), which
// skip against a cluster without ShareFetch v2, must run and pass. The
// kfake column is the control: its failures are shown, not judged.
//
// Logs of every run (test output and server output) are kept under --logs.
package main
