// Package testkit is test support for negotiation and markersender:
// FakeLeader, a scripted partition leader (a real wire server with a Kafka
// version profile, WriteTxnMarkers answers from a script, DescribeProducers
// from a table, restartable with another profile on the same address), and
// RunFile, a tiny data-driven runner (testdata/*.txt, "----" separates a
// case from its expected output, -rewrite refreshes the outputs).
//
// It is imported only by tests.
package testkit
