// Package historytest drives a transactional kgo producer through faults
// and checks what it did with the history checker (integration/checker):
// the tests of faults on demand in `txncoord up` and in processes of their
// own share it. Committer commits and aborts in a loop, as an application
// would, starting a new client after an error; Check reads the topic
// read_committed and fails on any anomaly.
package historytest
