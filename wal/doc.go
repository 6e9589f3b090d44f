// Package wal is the process's write-ahead log: records appended by any
// goroutine, made durable by one writer with one fdatasync per group
// commit, read back in order at open. It pairs with a bbolt backend the
// way etcd's WAL does: the log makes a write durable quickly; an applier
// copies it into bbolt later and then calls TruncateFront behind itself.
//
// It owns one directory of segment files named for their first record
// (fmt.Sprintf("%016x.wal", firstPos)); nothing else writes there. It
// knows nothing of what the records mean.
//
// Durability order, which the tests check under a simulated power loss
// (waltest.CrashFS):
//   - a record is reported durable (Durable, WaitDurable, OnDurable) only
//     after the fdatasync that covers it returned nil;
//   - a full segment is fdatasync'd BEFORE the next one is created, and
//     the directory is fsync'd BEFORE a record of the new segment is
//     reported durable; so only the last segment can have a torn tail;
//   - at open, every segment is fdatasync'd BEFORE its records are called
//     durable (the previous process may have died between write and sync).
//
// Group commit: Append frames the records into a pending buffer under a
// mutex and wakes the writer; the writer takes the whole buffer, writes it
// (a few writes when a segment rolls) and syncs once. Records that arrive
// during that fdatasync share the next one. By default there is no timer
// for them, as in hashicorp/raft: a lone record is written at once. With
// Options.CommitDelay a writer woken from idle by a record someone waits
// for first gathers for that long (microseconds: it yields, it does not
// sleep), so that records appended right behind it share its fdatasync
// (MySQL's binlog_group_commit_sync_delay); under load the writer is
// never idle and never gathers. A record appended with durable.Now
// (AppendJoined) is committed without that wait: its waiter expects
// nothing behind it.
//
// Lazy records: AppendLazy queues records nobody waits for yet, which
// start no group commit of their own: they go with the next record
// appended otherwise, when a WaitDurable asks for them, or at the latest
// Options.LazyDelay (2 ms) after the first of them was queued. A caller
// answered at append because it appends to the same log next, and writes
// that only record an outcome, so cost no fdatasync of their own. Order is
// that of the appends, lazy or not, so a lazy record is never durable
// after one appended behind it.
//
// Fail-stop: the first failed write, fdatasync, file creation or
// directory sync fails the log for good (Err, errors.Is(err, ErrFailed)).
// Every waiter, callback and later Append gets that error, and nothing
// queued is reported durable. A failed fsync is never retried: Linux may
// have dropped the dirty pages and marked them clean, so a retry that
// succeeds would vouch for data that is not on disk (PostgreSQL's
// "fsyncgate", 2018). Only a restart, which rereads and resyncs, goes on.
//
// Damage: a frame carries its length, its Pos and a CRC-32C over both and
// the data. At open a bad frame in the last segment that no valid later
// frame follows is a torn write: it is cut, with a Warn line naming file
// and offset. Anything else (a bad frame followed by a good one, a bad
// frame in an earlier segment before its last record, a missing segment) is refused with an
// ErrCorrupt error naming file and offset: cutting there could drop
// records that were reported durable, so an operator decides. A torn
// write whose later pages reached the disk before its earlier ones looks
// like that too and is refused as well: the safe side.
//
// Preallocation (Options.Preallocate, prealloc.go): segments are filled
// with zeros ahead of need and written over, so that an fdatasync flushes
// data without a change of size, while the disk has room for a filled
// segment and a segment of records besides (FS.Free); at open a tail of
// zeros is the unwritten rest of such a segment, accepted without a
// warning. A filled segment TruncateFront drops is recycled: renamed, it
// becomes the next one without a byte written, and its old frames, whose
// Pos are all below the segment's first, are never taken for records.
//
// Left out: a lock against a second process on the same
// directory, checksums of whole segments, and a bound on the queue
// (Append never waits; callers bound it by waiting for durability).
package wal
