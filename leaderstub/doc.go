// Package leaderstub is the embedded partition leader: partition logs,
// producer state, the last stable offset, the aborted-transaction index and
// the KIP-1228 marker validation. Its state is written through the process
// log into bbolt (package storage): its own file and log, or its bucket of
// the file the nodes of `txncoord up` share.
//
// It must not import the coordinator: it talks to the coordinator over the
// Kafka protocol (AddPartitionsToTxn v4/v5, InitProducerId) through a
// coordclient.Client (Config.Coordinator), as a real broker does, and
// batches its registrations with a coordclient.Registrar; tests use an
// in-memory twin. The client, its transports and the routing over several
// coordinators are package coordclient's.
//
// Main types: Leader (Open, Register, RegisterBeside, Close,
// ReceivedMarkers), Config. combined.go registers a leader beside the
// coordinator node's own handlers (a combined node).
// One handler file per API key (00_produce.go,
// 01_fetch.go, 02_list_offsets.go, 22_init_producer_id.go,
// 27_write_txn_markers.go, 61_describe_producers.go, 21_delete_records.go,
// 23_offset_for_leader_epoch.go, 35_describe_log_dirs.go, and the share
// groups' 78_share_fetch.go and 79_share_acknowledge.go with
// share_partitions.go: share sessions and each share partition's state,
// package shares' state machine, persisted as records of its own);
// topic_configs.go
// the topic configs a leader enforces; producers.go holds the
// pure validation (checkDataBatch, checkMarker = reference §2 table, from txnrules);
// cleaner.go the log cleaner's decision (pure, testdata/cleaner) and
// cleaner_run.go how a leader runs it and writes it through the process log;
// store.go its records (persistOp) and their codec; partition.go the in-memory
// index, LSO and retention; batch.go record batch v2 parsing and the control
// batch.
//
// Durability order: a batch or marker is validated and given its offset in
// memory under the partition lock, appended to the process log, and only
// after the log's group commit (fdatasync) does the high watermark move and
// the client get its answer. Fetch reads only below the high watermark, and a
// completed transaction keeps holding the LSO until its marker is durable.
//
// Beyond Kafka: a TV2 producer's batch at a bumped epoch that arrives while
// its previous transaction is still open on the partition is held back
// until that transaction's marker is applied (00_produce.go "Held
// batches"). Kafka would let it join the open transaction; txncoord's
// coordinator registers the next transaction before the previous markers
// are written, so the leader keeps the order.
//
// Where it simplifies Kafka, and why:
//   - one replica per partition at leader epoch 0: the high watermark is
//     the durable log end (no followers to wait for);
//   - no fetch sessions (SessionID 0: clients send full fetches);
//   - producer state is stored per producer at each write instead of being
//     rebuilt from the log, and producers never expire;
//   - retention deletes whole batches (Kafka: whole segments), at each
//     append of the partition (topic_configs.go);
//   - the log cleaner's active segment is the newest batches within
//     segment.bytes and younger than segment.ms (there are no segment
//     files), and a batch it rewrites is stored uncompressed;
//   - the 4.3-only rules (epoch 32767 while a txn is open) are not applied:
//     the baseline is Kafka 4.2.0.
package leaderstub
