// Package txncore is the transaction coordinator's core: Kafka's
// transaction state machine as pure functions of (stored metadata, request,
// now) → Outcome, and the types it decides on (Metadata, State,
// TopicPartition, Completion, Markers).
//
// It does no I/O and keeps no clock or goroutine; producer ids come from an
// injected PIDSource. Its outputs are plain values: the record to append
// (Outcome.Persist, Outcome.Delete), the markers to send (Outcome.Markers)
// and the answer to give (Outcome.Err, ProducerID/ProducerEpoch,
// PartitionErrs). Package coordinator submits the record, hands the
// markers to the marker sender with the record's position (delivered to a
// leader elsewhere only once it is durable), and answers once the record is
// durable (or appended, to a caller on the same log).
//
// It imports only the standard library and franz-go's kerr (the error
// codes are its answers): nothing of the network, storage or marker
// packages. txnlog aliases its types, so the store's records are these.
//
// Scenario files in testdata/ replay requests against it
// (TestScenarios, internal/datadriven).
package txncore
