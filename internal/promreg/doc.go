// Package promreg registers Prometheus collectors that several instances
// of one component in a process share (several nodes of `txncoord up`, a
// second marker sender in tests): Register returns the collector already
// registered under the same descriptors instead of failing.
//
// Main function: Register.
package promreg
