package txnrouter

// EndTxn (key 26) goes, unchanged, to the coordinator of its transactional
// id's partition (handleByID in handlers.go); the markers it enqueues on
// the shared sender come back to that coordinator through
// Router.MarkersWritten.
