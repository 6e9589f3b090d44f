// Package topictest holds the checks of the controller takeover tests
// (package node's, in one process, and package integration's, of
// separate processes), made with real clients: every topic created before
// a takeover is there with its id, partition count and config, and a
// topic created after one carries records.
//
// It must not start or stop anything: the tests own their clusters.
package topictest
