// Package markersender delivers every transaction's COMMIT/ABORT markers to
// the leaders of its partitions (WriteTxnMarkers), the coordinator side of
// KIP-1228.
//
// It owns: one queue per leader, batching everything queued for a leader into
// one WriteTxnMarkers request, a bounded number in flight, retries with capped
// exponential backoff and jitter, the response-handling table (README.md and
// 27_write_txn_markers.go), the INVALID_PRODUCER_EPOCH check through
// DescribeProducers (61_describe_producers.go), completion callbacks, and
// stuck-transaction detection.
//
// It must not choose request versions itself (negotiation.LeaderConn does,
// per leader and per connection) and must not import the coordinator:
// completion goes back through the Completer interface.
//
// With Config.Timeline each marker sent is recorded in its transaction's
// timeline with its WriteTxnMarkers version and its leader's answer.
//
// Main types: Sender (New, Start, Enqueue, Retry, Forget, Undelivered, Leaders, Markers,
// Close), Config, LeaderStatus and PendingTxn (the admin API's JSON).
package markersender
