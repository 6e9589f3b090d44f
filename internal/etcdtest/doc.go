// Package etcdtest starts real etcd members for tests, in-process through
// go.etcd.io/etcd/server/v3/embed, on loopback ports from internal/freeport
// with their data in t.TempDir().
//
// The members run with short heartbeat and election timeouts and without
// fsync, so a one-member cluster is serving in a fraction of a second and a
// three-member cluster elects a new leader quickly after a member dies;
// those settings are for tests only (a test's etcd data is thrown away).
//
// A Cluster can stop (graceful: leadership handed over first), kill
// (no leadership transfer, connections cut) and restart one member on its
// own ports and data, so tests can take quorum away and give it back.
// Clients made with Cluster.Client know every member's endpoint.
package etcdtest
