// Package bench measures what a transaction costs: it drives real kgo TV2
// transactional producers (Begin → ProduceSync → EndTransaction) against
// several targets started as child processes — txncoord (durable, and the
// opt-in --unsafe-no-fsync mode), txncoord-etcd3 (three coordinators sharing
// the transactional ids through the embedded etcd), franz-go kfake
// in memory and kfake with DataDir + SyncWrites — alternating between them
// round by round to cancel machine drift, and reports medians over rounds,
// with the goals of the commit path (Report.goals) and of scale-out
// (Report.scaleOutGoals). The scale mode (`txncoord-bench scale`, scale.go,
// scale_cli.go, scale_report.go) drives thousands of transactional ids and
// consumer groups against one `up --coordinators N`, each at one operation
// per interval, and kills one coordinator through /v1/faults to time how
// long its ids and groups wait.
//
// It owns: the workload (workload.go), the partition layout (layout.go), the
// targets and their child processes (target.go, kfake_child.go), the
// server-side measurements (/proc CPU, peak RSS and the host's steal time
// in procstat.go, the disk's fsync rate in fsync.go, txncoord's /metrics in
// metrics.go, the embedded etcd's in etcd.go, a CPU profile of the window
// split by component in profile.go), the round runner (runner.go) and the
// output (report.go, report_scaleout.go, plot.go).
//
// It must not: import any txncoord package. txncoord is measured from the
// outside, through its binary, its Kafka listeners and its admin /metrics,
// exactly as a user would measure it. Benchmarks report; nothing here fails
// on a timing.
package bench
