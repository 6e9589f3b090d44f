// Package markersender delivers every transaction's COMMIT/ABORT markers to
// the leaders of its partitions (WriteTxnMarkers), the coordinator side of
// KIP-1228.
//
// It owns: one queue per leader, batching everything queued for a leader into
// one WriteTxnMarkers request, a bounded number in flight, retries with capped
// exponential backoff and jitter, the response-handling table, completion
// callbacks, and stuck-transaction detection.
//
// It must not choose request versions itself (the negotiation package does,
// per leader and per connection) and must not import the coordinator:
// completion goes back through the Completer interface.
package markersender
