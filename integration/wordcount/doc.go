// Package wordcount is a stateful exactly-once application for the
// integration tests: it counts the words of an input topic in a kgo
// GroupTransactSession and keeps each word's count in a compacted
// changelog topic, written in the same transaction as the group's
// offsets; at start it restores its counts from the changelog
// (read_committed, the last value of each key), as a state store restores.
// Command countapp runs it as a child process, so that it and txncoord can
// be SIGKILLed; the tests read the changelog with Restore.
package wordcount
