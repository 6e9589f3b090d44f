// Package cluster loads and validates the cluster file and holds the cluster
// view every node answers Metadata from: brokers (coordinator + leaders),
// deterministic partition leaders and topic ids, auto-created topics, and the
// finalized transaction.version rule.
//
// Every node computes the same view from the same file with no coordination:
// partition p of topic t is led by leaders[(fnv32a(t)+p) mod len(leaders)]
// unless the controller placed it by hand (Topic.Replicas: the first
// replica leads, a coordinator node too: each is a combined node,
// View.PartitionNodes), and a topic's id derives from cluster_id and its
// name.
//
// It must not know about transactions beyond the transaction.version feature.
// Main types: File (the YAML file), View (the live view), and the shared
// Metadata handler (View.RegisterMetadata). Tests start real nodes from one
// file with the clustertest subpackage; testdata/*.txt are data-driven
// scenarios (go test ./cluster -run TestDataDriven -rewrite refreshes them).
package cluster
