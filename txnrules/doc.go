// Package txnrules holds the transaction-marker rules every partition that
// takes WriteTxnMarkers applies: the embedded leader's data partitions
// (leaderstub) and the group coordinator's __consumer_offsets partitions
// (groups). It is one implementation, so both answer a marker the same way
// (reference §2, KIP-1228): the strict TV≥2 epoch rule, Kafka's legacy ≥
// rule for TV 0/1, the KAFKA-19999 retry, and coordinator-epoch fencing.
//
// It is pure: functions take a Producer (the fields of a producer's state
// the rules read) and return the Producer to store, or a Kafka error and no
// change, so that a rejected marker changes no state. It must not know how
// a caller stores its state or what else a caller keeps per producer
// (leaderstub's sequence window, groups' pending offsets).
//
// Main types: Producer; CheckMarker, ApplyMarker, CheckTxnWrite.
package txnrules
