// Package admin is the coordinator's HTTP admin API (JSON) and the client
// the CLI uses for it.
//
// Endpoints (architecture.md "Admin HTTP API", a stable contract):
// GET /v1/transactions, GET /v1/transactions/{id},
// POST /v1/transactions/{id}/abort, GET /v1/leaders, GET /v1/markers,
// POST /v1/transactions/{id}/retry-markers (an addition to the contract),
// the topics (topics.go: GET /v1/topics, GET /v1/topics/{name},
// POST /v1/topics, DELETE /v1/topics/{name}; additions to the contract),
// the groups (groups.go: GET /v1/groups, GET /v1/groups/{id},
// DELETE /v1/groups/{id}; additions), the coordinators on etcd
// (coordinators.go: GET /v1/coordinators, an addition; 404 from a
// backend that does not report them), a transaction's timeline (Txn's
// timeline, GET /v1/transactions/{id}), paging and server-side filters
// of the transactions list and of a topic's partitions (paging.go), the
// partitions' producers (DescribeProducers) and the record browser
// (records.go: GET /v1/topics/{name}/records), all additions,
// GET /metrics (Prometheus), GET /healthz, GET /readyz, Go's
// /debug/pprof/ profiles (an addition to the contract), and the web
// console at GET / with its files under /console/ (package console; served
// without the token, which the page asks for before it reads the API).
// Errors are JSON {"error": "..."} with the matching HTTP status; a known
// path asked with another method is answered 405 with an Allow header.
// Connections have read, write and idle timeouts (server.go timeouts), and
// the bearer token's scheme is matched without regard to case.
//
// It must not hold transaction logic: it reads and asks through Backend.
package admin
