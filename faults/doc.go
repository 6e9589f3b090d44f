// Package faults holds the faults an operator or a test injects into a
// running node on demand (the admin API's /v1/faults, `txncoord fault`):
// per node and API key, delay a request or its response, drop it (close
// the connection without answering, before or after the handler ran), or
// answer a chosen Kafka error code, for the next N requests or for a
// duration; pause a node (it stops reading requests, its connections stay
// open, as a stopped process); hold the WriteTxnMarkers the marker sender
// sends to a leader until released, keeping a copy of each, which can be
// replayed later (a late marker, the KIP-1228 case).
//
// A process that can stop and restart its nodes (Lifecycle) takes Kill
// faults, and is told when a node's pause begins and ends, to stop what a
// stopped process would stop besides reading requests (a coordinator's
// etcd keepalives).
//
// It owns the fault table (Set), its JSON types (Spec, Fault, HeldMarker,
// ReplayResult), its log lines and its metrics. It must not import wire or
// markersender: the wire layer asks a Node handle what to do with a request
// (Node.Request) and the marker sender asks Set.HoldMarkers before each
// WriteTxnMarkers; both check Armed first, one atomic load, so a node with
// no fault pays nothing else on its request path.
//
// Main types: Set (New, Add, List, Remove, Clear, Replay, HoldMarkers,
// Node), Node (Armed, Request), Decision.
package faults
