package leaderstub

// APIs are the API keys a leader serves with their version ranges, before
// the node's profile caps them. Other nodes advertise them too (and answer
// NOT_LEADER_OR_FOLLOWER), since clients such as KafkaJS expect every broker
// of a cluster to advertise the same APIs. Produce is advertised from v0 and
// Fetch from v4, as Kafka 4.x advertises them; Produce v0–v2 are refused by
// the wire server on every node (wire/refused.go).
var APIs = map[int16][2]int16{
	0:  {produceMinVersion, produceMaxVersion},
	1:  {fetchMinVersion, fetchMaxVersion},
	2:  {listOffsetsMinVersion, listOffsetsMaxVersion},
	22: {initProducerIDMinVersion, initProducerIDMaxVersion},
	27: {writeTxnMarkersMinVersion, writeTxnMarkersMaxVersion},
	61: {0, 0},
	21: {deleteRecordsMinVersion, deleteRecordsMaxVersion},
	23: {offsetForLeaderEpochMinVersion, offsetForLeaderEpochMaxVersion},
}
