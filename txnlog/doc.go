// Package txnlog is the durable store of transaction metadata (including each
// transaction's client transaction version), the coordinator epoch and the
// producer-id block high-water mark.
//
// It owns a small Store interface, an in-memory twin for tests, and a bbolt
// implementation with a single-writer group commit: one goroutine drains
// every pending change into one bbolt Update, and callers are answered only
// after that Update's fsync. Records use a versioned codec.
//
// It must not know request formats.
package txnlog
