package wire

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions a node advertises but refuses.
//
// Kafka 4.0 removed Produce v0–v2 (KIP-896: message formats v0/v1 are gone,
// v3 is the baseline), yet its brokers still advertise Produce from v0 in
// ApiVersions: librdkafka enables gzip, snappy, lz4 and zstd only when the
// broker's Produce range includes the exact versions it checks for, v0
// among them, and otherwise sends every batch uncompressed (KAFKA-18659,
// librdkafka #4956; ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION). A
// Produce v0–v2 request is refused at its header
// (SocketServer.parseRequestHeader throws UnsupportedVersionException): the
// broker closes the connection without answering, on every broker, before
// any API handler sees the body. The server does the same here, for every
// node that advertises Produce (leaders and the stand-ins of the other
// nodes), with one info line naming the client and the version: the
// answers already queued on the connection are written first, nothing read
// after it is handled. Kafka 3.9 still accepted these versions (converting
// magic 0/1 messages); txncoord stores record batch v2 only, so a node of
// the 3.9 profile refuses them too.

// Who is shown the refused versions: Kafka 4.x shows them to every client;
// txncoord shows them only to librdkafka (its ApiVersions v3+
// ClientSoftwareName), the client they are advertised for. Every other
// client is shown the versions the node accepts (Produce from v3, as
// franz-go's kfake does), so a client that checks the range before sending
// (kgo pinned to 0.10.2: "broker is too old", franz-go's
// TestIssueProduceBrokerTooOldFailsRecords) fails at once instead of
// retrying into a closed connection. A librdkafka that falls back to
// ApiVersions v0 names no software and sees the accepted range.

// showsRefused reports whether a client of this software is shown the
// advertised-but-refused versions.
func showsRefused(softwareName string) bool {
	return strings.EqualFold(softwareName, "librdkafka")
}

// acceptedOnly returns keys with each minimum raised past the versions the
// server refuses.
func acceptedOnly(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	out := slices.Clone(keys)
	for i, k := range out {
		if below, ok := refusedBelow[k.ApiKey]; ok && k.MinVersion < below && k.MaxVersion >= below {
			out[i].MinVersion = below
		}
	}
	return out
}

// refusedBelow maps an API key to the lowest version the server accepts
// among those it advertises.
var refusedBelow = map[int16]int16{
	0: 3, // Produce: KIP-896, KAFKA-18659
}

// refused reports whether a request of key at version, inside the
// advertised range, is refused by closing the connection.
func refused(key, version int16) bool {
	below, ok := refusedBelow[key]
	return ok && version < below
}
