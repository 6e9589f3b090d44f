// Package faultproxy is a fault-injecting TCP proxy for the Kafka protocol,
// for tests: put it between the coordinator's marker sender and one leader
// (or a client and a node) and, per API key, hold, delay, duplicate or drop
// requests, cut connections, and replay a captured request later on a fresh
// connection (the late WriteTxnMarkers of KAFKA-17754 / KIP-1228).
//
// It owns its listener, the proxied connection pairs and their goroutines;
// Close stops all of them. It must not be used outside tests and does not
// import the server packages: it parses frames itself (size prefix, request
// header v0-v2) and decodes bodies with kmsg only to show them to the test.
//
// Faults act on the client-to-server direction of a connection, in order:
// a held or delayed request also holds back every later request of that
// connection, as a stalled TCP stream would, so responses always reach the
// client in the order Kafka clients expect. Where it simplifies:
//   - a Produce with acks=0 has no response; the proxy does not decode acks,
//     it skips unanswered requests when a later correlation id comes back;
//   - Drop discards one request and keeps the stream going, so a client that
//     pipelines sees a correlation-id gap (kgo and wire.Client then fail the
//     connection), a sender with one request in flight simply times out;
//   - one fault per API key at a time; setting another replaces it.
package faultproxy
