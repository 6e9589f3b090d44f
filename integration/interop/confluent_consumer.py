"""A confluent-kafka (librdkafka) read_committed consumer for make interop.

Usage: confluent_consumer.py BOOTSTRAP TOPIC PARTITIONS

assign()s every partition from the beginning, with partition EOF events on,
and reads until each partition reported EOF. Prints one value per line on
stdout. Exits 1 on any consumer error, on a librdkafka protocol error in its
log (a null record set in a Fetch answer was "Protocol parse failure ...
invalid MessageSetSize -1", logged every 0.5 s with no EOF ever), or if EOF
is not reached within 60 s.
"""
import logging
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING


class Protocol(logging.Handler):
    """Keeps librdkafka's log lines; a PROTOERR line fails the run."""

    def __init__(self):
        super().__init__()
        self.errors = []

    def emit(self, record):
        msg = record.getMessage()
        if "PROTOERR" in msg or "Protocol parse failure" in msg:
            self.errors.append(msg)


def read_committed(bootstrap, topic, partitions, group, timeout=60, logger=None, failed=lambda: None):
    """Reads every partition of topic read_committed from the beginning
    (assign()) until each reported EOF; returns the values. Raises
    RuntimeError on a consumer error, when failed() names one, or without
    EOF within timeout seconds."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,  # needed by the client; assign() uses no group
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }
    c = Consumer(conf, logger=logger) if logger else Consumer(conf)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    eof, values = set(), []
    deadline = time.monotonic() + timeout
    while len(eof) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no EOF on partitions {sorted(set(range(partitions)) - eof)} within {timeout} s")
        why = failed()
        if why:
            raise RuntimeError(why)
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            raise RuntimeError(f"consumer error: {m.error()}")
        values.append(m.value().decode())
    c.close()
    why = failed()
    if why:
        raise RuntimeError(why)
    return values


def main():
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = logging.getLogger("librdkafka")
    log.setLevel(logging.DEBUG)
    proto = Protocol()
    log.addHandler(proto)
    try:
        values = read_committed(bootstrap, topic, partitions, "interop-confluent-consumer", logger=log,
                                failed=lambda: proto.errors and f"librdkafka protocol error: {proto.errors[0]}")
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    for v in values:
        print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
