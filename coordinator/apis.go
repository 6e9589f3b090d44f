package coordinator

import "github.com/txncoord/txncoord/wire"

// apis are the APIs the coordinator serves, each declared in its handler
// file. Register, Handlers, txnrouter and the stand-ins of the nodes that
// do not run the coordinator all read this one list.
var apis = wire.APIs[*Coordinator]{initProducerIDAPI, addPartitionsAPI, addOffsetsAPI, endTxnAPI, describeTxnsAPI, listTxnsAPI}

// Declared is the coordinator's list of APIs, for a node that dispatches
// them to one of several coordinators (txnrouter).
func Declared() wire.APIs[*Coordinator] { return apis }

// APIs are the API keys the coordinator serves with their version ranges,
// before the node's profile caps them. Leaders advertise them too (and
// answer NOT_COORDINATOR), since clients such as KafkaJS expect every broker
// of a cluster to advertise the same APIs.
var APIs = apis.Ranges()
