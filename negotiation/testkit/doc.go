// Package testkit is test support for negotiation and markersender:
// FakeLeader, a scripted partition leader (a real wire server with a Kafka
// version profile, WriteTxnMarkers answers from a script, DescribeProducers
// from a table, restartable with another profile on the same address). The
// data-driven runner these tests use is internal/datadriven.
//
// It is imported only by tests.
package testkit
