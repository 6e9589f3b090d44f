// Package coordinator is the transaction coordinator: Kafka's transaction
// state machine, kept pure (no I/O; the clock is injected), and the
// coordinator's request handlers, one file per API key.
//
// Given the stored metadata of a transactional id, a request and now, the
// core returns the metadata to persist, the response, and the markers to
// send. The handlers wire it to the txnlog store and the marker sender.
//
// It must not touch bbolt or sockets directly.
package coordinator
