// Package node assembles txncoord's processes from its parts: a coordinator
// node (wire server + coordinator + transaction log + marker sender + admin
// API, and with one coordinator and no etcd an embedded partition leader of
// its own: a KRaft combined node) and leader nodes (wire server + embedded partition leader), either
// one per process (txncoord coordinator / leader) or all in one process
// (txncoord up, the embedded default).
//
// It owns start order and stop order, nothing else: no protocol or state
// logic lives here.
//
// Files: coordinator.go (a coordinator node: the transaction coordinator,
// its store and marker sender, the group coordinator, the controller),
// etcd_coordinator.go (the same on etcd, one coordinator per owned
// partition), groups_etcd.go (the group coordinator under its etcd lease),
// leader.go (a leader node), up.go (`txncoord up`: every node in one
// process over one process log), up_spec.go (up's flags as a cluster
// file), up_coordinators.go (up's coordinators and their shared etcd),
// etcd_server.go (the embedded etcd member), in_process.go (the leaders'
// in-process client of the coordinator), txn_clients.go (the clients of
// the transaction coordinators over TCP, and the group coordinator's),
// store.go (the process store and its metrics), metrics.go (the
// transaction log's series), admin_*.go (the admin API's backends).
package node
