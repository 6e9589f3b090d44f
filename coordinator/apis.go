package coordinator

// APIs are the API keys the coordinator serves with their version ranges,
// before the node's profile caps them. Leaders advertise them too (and
// answer NOT_COORDINATOR), since clients such as KafkaJS expect every broker
// of a cluster to advertise the same APIs.
var APIs = map[int16][2]int16{
	22: {initProducerIDMin, initProducerIDMax},
	24: {addPartitionsMin, addPartitionsMax},
	25: {addOffsetsMin, addOffsetsMax},
	26: {endTxnMin, endTxnMax},
	65: {describeTxnsMin, describeTxnsMax},
	66: {listTxnsMin, listTxnsMax},
}
