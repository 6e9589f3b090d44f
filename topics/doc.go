// Package topics is the controller: as in KRaft, one node (the first
// coordinator node, or with several coordinators on etcd whichever holds
// the controller's lease) owns which topics exist, their partition counts and their configs, and
// every other node learns them from it. Placement stays the contract's
// rule (partition p of topic t is led by leaders[(fnv32a(t)+p) mod n])
// except for partitions placed by hand (an assignment over the brokers that
// can lead, cluster.View.PartitionNodes): their replica lists are part of
// the topic's state, the first replica leading. Other nodes learn the
// lists from Metadata's replicas.
//
// The controller keeps its state in the space "topics" of the coordinator's
// store (record kind storage.KindTopic), or with several coordinators in
// etcd under the lease of whichever holds it (Records; package topicsetcd):
// one record per change, the whole state of one topic (record.go). A deleted topic stays as a tombstone that
// keeps its incarnation, so a topic created again under the same name gets
// another id (cluster.TopicIDOf), as Kafka gives a re-created topic a new
// id, while a topic never deleted keeps the id every node derives from
// cluster_id and its name.
//
// Durability order: a change is answered, and shown in the cluster view,
// only once its record is durable; the view's OnTopicRemoved hooks (leaders
// drop a deleted topic's data) run after that.
//
// It serves CreateTopics (19), DeleteTopics (20) and CreatePartitions (37)
// on the coordinator node, or the holder of the controller's lease (one
// handler file per key; RegisterSwitch on a coordinator that serves them
// only while it holds the lease) and auto-creation (the view's creator). A leader node forwards those keys, and the config
// alters, to the coordinator node and relays the answer, as Kafka's
// brokers forward to the controller (forward.go, KIP-590); it answers
// NOT_CONTROLLER only when the controller cannot be reached, so clients
// go to Metadata's ControllerID. Every node answers DescribeConfigs. A node
// in a process of its own follows the controller with a Follower (sync.go):
// it polls Metadata at the controller (the coordinator node, a holder of
// the lease it is told of, or the one Metadata names), refreshes at once when a request
// names a topic it does not know, and asks the controller to create topics
// it auto-creates.
//
// It must not know about transactions or partition data. Main types:
// Controller (Open, Register, Create/Delete/CreatePartitions through the
// handlers, AlterConfigs, List), Records, Follower, Info (a topic as the
// admin API shows it).
package topics
