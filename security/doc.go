// Package security holds txncoord's security material and turns it into
// wire's configuration.
//
// It owns: the credentials file (YAML; per user SCRAM-SHA-256 and
// SCRAM-SHA-512 salted hashes, never a password; PLAIN is verified against
// the SCRAM-SHA-512 hash), the cluster principal and per-principal
// transactional-id prefixes (the Authorizer), TLS configs from PEM files,
// the security section of the cluster file (Settings), the admin API's
// bearer-token check, and GenerateLocal, which makes a local CA, node and
// client certificates, credentials and an admin token for `up --secure`.
//
// It must not: serve the protocol (wire does), or know about transactions
// beyond the transactional-id resource.
//
// Main types: Credentials (the loaded file; implements wire.Credentials
// and, through Authorizer, wire.Authorizer), Settings, Local.
package security
