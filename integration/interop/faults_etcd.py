#!/usr/bin/env python3
"""Faults on demand in the etcd mode from a confluent-kafka (librdkafka)
suite, with HTTP alone: a coordinator failover mid-stream.

Usage: faults_etcd.py BOOTSTRAP ADMIN_URL TOPIC PARTITIONS

Against `txncoord up --coordinators 3` (faults_etcd.sh starts it): a
transactional producer commits and aborts in turn; the test pauses the
coordinator of its transactional id (coordinator_id of GET
/v1/transactions/ID) through POST /v1/faults; the paused node reads no
request and its etcd lease lapses, another coordinator takes the id's
partition over, and the producer must commit again through it (its
coordinator_id changed). Then DELETE /v1/faults ends the pause, two more
transactions run, and a read_committed consumer (assign(), to partition
EOF) must read every committed value once and no aborted one; a
transaction whose commit failed (unknown outcome) must be read whole once
or not at all. Exits 1 on any failure.
"""
import sys
import time

from confluent_kafka import KafkaException, Producer

from confluent_consumer import read_committed
from faults import call

TID = "interop-etcd-faults"


def fail(msg):
    sys.exit("faults_etcd.py: FAIL: " + msg)


def log(msg):
    print("faults_etcd.py: " + msg, file=sys.stderr)


class Run:
    def __init__(self, bootstrap, topic, partitions):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.outcomes = {}  # transaction number -> committed | aborted | unknown
        self.producer = None

    def new_producer(self):
        self.producer = Producer({
            "bootstrap.servers": self.bootstrap,
            "transactional.id": TID,
            "transaction.timeout.ms": 60000,
            "message.timeout.ms": 60000,
            # A paused coordinator never answers: give up on a request
            # after 5 s, so librdkafka looks the coordinator up again.
            "socket.timeout.ms": 5000,
        })
        self.producer.init_transactions(120)

    def values(self, n):
        return [f"{TID}-{n}-{p}" for p in range(self.partitions)]

    def txn(self, commit):
        """Runs one transaction; returns True once it committed."""
        n = len(self.outcomes)
        self.outcomes[n] = "aborted"  # nothing asked to commit yet
        try:
            self.producer.begin_transaction()
            for p, v in enumerate(self.values(n)):
                self.producer.produce(self.topic, value=v.encode(), partition=p)
            if not commit:
                self.producer.abort_transaction(120)
                return False
            self.outcomes[n] = "unknown"
            deadline = time.monotonic() + 120
            while True:
                try:
                    self.producer.commit_transaction(30)
                    self.outcomes[n] = "committed"
                    return True
                except KafkaException as e:
                    err = e.args[0]
                    if err.retriable() and time.monotonic() < deadline:
                        log(f"transaction {n}: commit retried after {err}")
                        continue
                    raise
        except KafkaException as e:
            err = e.args[0]
            log(f"transaction {n}: {err}")
            if err.txn_requires_abort():
                try:
                    self.producer.abort_transaction(120)
                    self.outcomes[n] = "aborted"
                    return False
                except KafkaException as abort_err:
                    log(f"transaction {n}: abort failed: {abort_err}")
            # Fatal or not abortable: a new producer fences this one (its
            # InitProducerId aborts what is open); the outcome stays as it
            # was recorded (unknown once the commit was asked).
            self.new_producer()
            return False


def coordinator_of(admin):
    return call(admin, "GET", "/v1/transactions/" + TID)["coordinator_id"]


def wait_complete(admin):
    """Waits until the id's last transaction has its markers written: its
    commit returned once the Prepare was durable, and a read_committed
    read stops at the last stable offset, before a transaction whose
    markers are still in flight."""
    start = time.monotonic()
    deadline = start + 60
    first = None
    while True:
        state = call(admin, "GET", "/v1/transactions/" + TID)["state"]
        first = first or state
        if state in ("CompleteCommit", "CompleteAbort", "Empty"):
            if first != state:
                log(f"{TID} was {first} when its last commit returned; {state} {time.monotonic() - start:.3f} s later")
            return
        if time.monotonic() > deadline:
            fail(f"{TID} still {state} 60 s after its last transaction ended")
        time.sleep(0.1)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    bootstrap, admin, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    run = Run(bootstrap, topic, partitions)
    run.new_producer()
    for i in range(4):
        run.txn(commit=i % 2 == 0)
    paused = coordinator_of(admin)
    fault = call(admin, "POST", "/v1/faults", {"kind": "pause", "node": paused})
    log(f"paused coordinator {paused} (fault {fault['id']}), the coordinator of {TID}")
    deadline = time.monotonic() + 180
    while True:
        if time.monotonic() > deadline:
            fail(f"no commit through another coordinator than the paused {paused} within 180 s")
        if run.txn(commit=True) and coordinator_of(admin) != paused:
            break
    took_over = coordinator_of(admin)
    log(f"committed through coordinator {took_over} after the takeover")
    listed = call(admin, "GET", "/v1/faults")["faults"]
    if [f["id"] for f in listed] != [fault["id"]]:
        fail(f"GET /v1/faults during the pause: {listed}, want the pause")
    call(admin, "DELETE", "/v1/faults")
    if call(admin, "GET", "/v1/faults")["faults"]:
        fail("faults left after DELETE /v1/faults")
    run.txn(commit=False)
    run.txn(commit=True)
    wait_complete(admin)
    try:
        read = read_committed(bootstrap, topic, partitions, "interop-etcd-faults-check", timeout=90)
    except RuntimeError as e:
        fail(str(e))
    counts = {}
    for v in read:
        counts[v] = counts.get(v, 0) + 1
    committed = aborted = unknown = 0
    for n, outcome in run.outcomes.items():
        seen = [counts.get(v, 0) for v in run.values(n)]
        if outcome == "committed":
            committed += 1
            if seen != [1] * partitions:
                fail(f"committed transaction {n} read {seen} times per partition, want once each")
        elif outcome == "aborted":
            aborted += 1
            if any(seen):
                fail(f"aborted transaction {n} read {seen} times per partition, want never")
        else:
            unknown += 1
            if seen not in ([0] * partitions, [1] * partitions):
                fail(f"transaction {n} of unknown outcome read {seen} times per partition, want all once or none")
    stray = [v for v in counts if not v.startswith(TID + "-")]
    if stray:
        fail(f"read values no transaction wrote: {stray[:5]}")
    if committed == 0 or aborted == 0:
        fail(f"{committed} committed and {aborted} aborted transactions: want both")
    print(f"etcd-mode pause of coordinator {paused}, takeover by {took_over}: {committed} committed, "
          f"{aborted} aborted, {unknown} unknown transactions; read_committed: every committed value once, no aborted one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
