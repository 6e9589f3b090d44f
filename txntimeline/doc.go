// Package txntimeline keeps, for the most recent transactional ids, a short
// history of what happened to their transactions: InitProducerId, each
// partition added, Prepare, each marker sent (with its WriteTxnMarkers
// version) and each leader's answer per partition, Complete. The admin
// API shows it as a transaction's timeline; the coordinator's stored
// state holds only the current state.
//
// It owns only that memory and must stay cheap on the commit path: an
// event is a fixed-size value copied into a fixed-size ring (Events per
// id), rings are recycled, oldest id first, once MaxIDs ids have one, and
// ids are spread over shards with a lock each. In steady state recording
// allocates nothing. It is not durable: a restart starts with empty
// timelines, and an id evicted or not seen since keeps none.
//
// Main type: Recorder (a nil *Recorder records nothing, so callers need no
// checks).
package txntimeline
