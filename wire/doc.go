// Package wire is the Kafka protocol server every txncoord node runs, and the
// small client the nodes use to talk to each other.
//
// It owns: the TCP listener, 4-byte length-prefixed framing with a size limit
// checked before any allocation, request headers v0–v2, decoding bodies with
// franz-go kmsg, encoding responses with the right header (flexible responses
// use header v1, except ApiVersions which always uses v0), dispatch by API key
// to registered handlers, version checks against the node's version profile,
// the KIP-511 ApiVersions answer, in-order responses on each connection, and
// graceful shutdown.
//
// Security (Config.Security, nil = off): TLS listeners with optional
// client-certificate verification, SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512
// as Kafka does it (SaslHandshake and SaslAuthenticate built in, like
// ApiVersions; nothing but ApiVersions before authentication), the
// principal in Request.Principal, and authorization helpers that handlers
// call (ClusterAction, TransactionalIDAllowed, and Access.Guard, which an API declaration
// (api.go) applies; see
// authz.go for the rules). DialWith is the client side for inter-node
// traffic.
//
// It must not know about transactions: it does not import coordinator,
// leaderstub, txnlog or markersender. Handlers and the version profile are its
// inputs.
//
// Resources (Config.Limits, limits.go, budget.go): a Budget bounds the
// memory of requests in flight across the servers that share it (one per
// process by default, as Kafka's queued.max.request.bytes): frames count
// from their first byte until answered, handlers charge what they hold
// (BudgetFrom), and a request that does not fit waits with its connection
// unread. Frames are read as they arrive, in chunks charged to the budget.
// An idle connection holds a reader goroutine and a small struct (no read
// buffer, no writer goroutine, no reply slots). MaxConnsPerIP limits one
// address; at MaxConns the longest-idle connection makes room. HTTP or TLS
// on a plaintext Kafka port is named in one log line (notkafka.go).
// Collector exports connections and the budget to Prometheus.
//
// PartitionSplit (split.go) serves WriteTxnMarkers and DescribeProducers
// on a node where different handlers own different partitions: it splits
// a request by each (topic, partition)'s destination, in the request's
// order, and joins the answers in the request's shape.
//
// Main types: Registry (handlers by API key with their version range), Server
// (listener and connections), Handler and Reply (how a handler answers, now or
// after some durable write), Client (one connection to another node) and
// LocalClient (the same handlers called in-process, local.go; Inline ones
// wait for the Reply on the caller's goroutine). Request.Logger is built on
// first use: most requests log nothing.
package wire
