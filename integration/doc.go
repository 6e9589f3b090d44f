// Package integration holds the end-to-end suites: real clients against
// coordinator and leaders on loopback, mixed versions, a fault-injecting
// proxy and a history checker.
package integration
