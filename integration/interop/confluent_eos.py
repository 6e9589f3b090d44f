"""A confluent-kafka (librdkafka) consume-transform-produce stage for make interop.

Usage: confluent_eos.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID N

subscribe()s to IN in GROUP with isolation.level=read_committed and no
auto-commit; for each batch it reads, a transactional producer writes
"out-<value>" to OUT and commits the consumer's positions in the same
transaction (send_offsets_to_transaction(consumer.position(assignment),
consumer_group_metadata()), commit_transaction()). The second batch is
written as "aborted-<value>", flushed (so it is in the log) and aborted;
the consumer then seeks back to the group's committed offsets and reads the
batch again. Stops once N values are committed, after checking the
group's committed offsets are the log end of IN. Prints one summary line
(batches=, values=, aborted=) on stdout; exits 1 on any error.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING

ABORT_BATCH = 1  # the second batch with values


def main():
    bootstrap, src, dst, group, txid, n = sys.argv[1:7]
    n = int(n)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txid,
        "linger.ms": 5,
    })
    producer.init_transactions(30)
    consumer.subscribe([src])
    try:
        return stage(consumer, producer, dst, n)
    finally:
        consumer.close()


def stage(consumer, producer, dst, n):
    failed = []

    def delivered(err, msg):
        if err is not None:
            failed.append(err)

    done = batches = aborted = 0
    deadline = time.monotonic() + 90
    while done < n:
        if time.monotonic() > deadline:
            print(f"only {done} of {n} values committed in 90 s", file=sys.stderr)
            return 1
        msgs = consumer.consume(num_messages=250, timeout=0.5)
        if not msgs:
            continue
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
        abort = batches == ABORT_BATCH and not aborted
        prefix = "aborted-" if abort else "out-"
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, value=prefix + m.value().decode(), on_delivery=delivered)
        if abort:
            # Flushed first: the aborted values must be in the log, for the
            # read_committed check to show the abort hid them.
            producer.flush(30)
            if failed:
                raise KafkaException(failed[0])
            producer.abort_transaction(30)
            aborted = len(msgs)
            rewind(consumer)
            continue
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        if failed:
            raise KafkaException(failed[0])
        done += len(msgs)
        batches += 1
    if done != n:
        print(f"committed {done} values, {n} were written", file=sys.stderr)
        return 1
    # The group's committed offsets, not position(): in librdkafka 2.0.2 a
    # seek() leaves position() at OFFSET_INVALID (-1001) until a message of
    # the partition is consumed, so after the rewind a partition read to its
    # end before the abort has no position (and none is sent with the
    # offsets: its committed offset stays).
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        _, high = consumer.get_watermark_offsets(tp, timeout=30)
        if tp.offset != high:
            print(f"{tp.topic}[{tp.partition}]: committed {tp.offset}, log end {high}", file=sys.stderr)
            return 1
    print(f"batches={batches} values={done} aborted={aborted}")
    return 0


def rewind(consumer):
    """Seeks every assigned partition back to the group's committed offset
    (the beginning where nothing is committed yet): the aborted batch is
    read again."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


if __name__ == "__main__":
    sys.exit(main())
