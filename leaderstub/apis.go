package leaderstub

import "github.com/txncoord/txncoord/wire"

// apis are the APIs a leader serves, each declared in its handler file:
// Register and the stand-ins of the nodes that lead no partitions read
// this one list.
var apis = wire.APIs[*Leader]{produceAPI, fetchAPI, listOffsetsAPI, deleteRecordsAPI, initProducerIDAPI,
	offsetForLeaderEpochAPI, writeTxnMarkersAPI, describeLogDirsAPI, describeProducersAPI, shareFetchAPI, shareAcknowledgeAPI,
	initializeShareGroupStateAPI, deleteShareGroupStateAPI, readShareGroupStateSummaryAPI}

// APIs are the API keys a leader serves with their version ranges, before
// the node's profile caps them. Other nodes advertise them too (and answer
// NOT_LEADER_OR_FOLLOWER), since clients such as KafkaJS expect every broker
// of a cluster to advertise the same APIs.
var APIs = apis.Ranges()

// Declared is the leader's list of APIs.
func Declared() wire.APIs[*Leader] { return apis }
