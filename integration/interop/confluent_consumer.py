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


def main():
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = logging.getLogger("librdkafka")
    log.setLevel(logging.DEBUG)
    proto = Protocol()
    log.addHandler(proto)
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "interop-confluent-consumer",  # needed by the client; assign() uses no group
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }, logger=log)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    eof = set()
    deadline = time.monotonic() + 60
    while len(eof) < partitions:
        if time.monotonic() > deadline:
            print(f"no EOF on partitions {sorted(set(range(partitions)) - eof)} within 60 s", file=sys.stderr)
            return 1
        if proto.errors:
            print(f"librdkafka protocol error: {proto.errors[0]}", file=sys.stderr)
            return 1
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            print(f"consumer error: {m.error()}", file=sys.stderr)
            return 1
        print(m.value().decode())
    c.close()
    if proto.errors:
        print(f"librdkafka protocol error: {proto.errors[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
