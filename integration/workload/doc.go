// Package workload drives transactional producers against a Kafka cluster
// (txncoord, kfake, or a real one) and records the history the checker
// needs, then reads every partition back with read_committed.
//
// Each driver writes unique values (prefix-counter) to the configured
// partitions in transactions of TxnSize values and commits, or aborts with
// probability AbortP (seeded math/rand, so a run is reproducible). Drivers:
// kgo at TV2 (default versions), kgo held at TV1 (MaxVersions 3.9), sarama
// (legacy TV0 transactions), and confluent-kafka-go (librdkafka, cgo). All
// four share one loop (loop.go) over a small per-client interface.
// Config.Security (nil: plaintext) makes every driver and
// ReadCommittedSecure connect with TLS, verifying the server against a CA
// file, and SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (security.go).
//
// Outcomes are recorded as the client saw them: a commit that returned nil
// is Committed; an abort, or any transaction that failed before its commit
// was asked for, is Aborted (it can never become visible); a commit that
// returned an error is Unknown. After any error the driver closes its client
// and makes a new one with the same transactional id: InitProducerId fences
// whatever the old one left open, as an application restart would.
//
// In a -race binary the sarama driver runs in a child process built
// without -race (saramachild.go, saramaworker/): sarama's own data race
// must not fail our tests, and the rest of the process keeps the detector.
//
// It owns the client goroutines it starts (closed before Run returns); it
// must not judge histories (the checker does).
package workload
