// Package negotiation owns the Kafka version profiles (3.9, 4.0, 4.1, 4.2,
// from franz-go kversion presets) and, on the coordinator side, the
// per-leader ApiVersions handshake: on every (re)connect LeaderConn asks the
// leader which versions it supports and chooses the WriteTxnMarkers version
// as min(the coordinator's max by its profile, the leader's advertised max)
// (ChooseVersion); with discovery off it always sends the coordinator's max,
// reproducing Kafka 4.2.0. DescribeProducers goes at min(kmsg max, leader max).
//
// It exposes per leader (Status): node id, address, advertised range,
// version in use, connected, last error and time of the last negotiation.
//
// It must not know about transactions or markers beyond the version choice.
// Subpackage testkit holds a scripted fake leader shared by this package's
// and markersender's tests.
package negotiation
