package txnrouter

// AddOffsetsToTxn (key 25) goes, unchanged, to the coordinator of its
// transactional id's partition (handleByID in handlers.go): NOT_COORDINATOR
// when this node does not own it, COORDINATOR_LOAD_IN_PROGRESS while it
// opens.
