// Package node assembles txncoord's processes from its parts: a coordinator
// node (wire server + coordinator + transaction log + marker sender + admin
// API) and leader nodes (wire server + embedded partition leader), either
// one per process (txncoord coordinator / leader) or all in one process
// (txncoord up, the embedded default).
//
// It owns start order and stop order, nothing else: no protocol or state
// logic lives here.
package node
