// A KafkaJS 2.2.4 member of an exactly-once chain (package integration/eos,
// run by eos.sh through eosrun): it takes eosmember's flags and writes the
// same history, one JSON line per step, each with one write before the
// step, so a SIGKILL leaves an exact record.
//
// The loop: a consumer in the group (read_committed, autoCommit off, one
// eachBatch at a time), and per chunk of up to -batch records one
// transaction: send the transformed records to the same partition of the
// next topic, transaction.sendOffsets (AddOffsetsToTxn + TxnOffsetCommit,
// TV1; KafkaJS sends no generation or member id), commit. After an abort
// the consumer seeks back to the chunk's first offset. An error the loop
// cannot go on from ends the process with status 1 (eosrun restarts it).
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

function flags(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('-') || i + 1 >= argv.length) throw new Error(`bad flag ${argv[i]}`);
    out[argv[i].replace(/^-+/, '')] = argv[i + 1];
  }
  return out;
}

function durationMs(s) {
  const m = /^([0-9.]+)(ms|s|m)?$/.exec(s || '0');
  if (!m) return 0;
  const n = parseFloat(m[1]);
  return m[2] === 's' ? n * 1000 : m[2] === 'm' ? n * 60000 : m[2] === 'ms' ? n : n / 1e6;
}

// mulberry32: a small seeded generator, so a run's aborts are reproducible.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function main() {
  const f = flags(process.argv.slice(2));
  const stage = parseInt(f.stage, 10);
  const batchMax = parseInt(f.batch || '50', 10);
  const abortP = parseFloat(f['abort-p'] || '0');
  const pauseMs = durationMs(f.pause);
  const random = rng(parseInt(f.seed || '1', 10));
  const hist = fs.openSync(f.history, 'a');
  const record = (line) => fs.writeSync(hist, JSON.stringify(line) + '\n');
  record({ ev: 'start', member: f.name, stage, client: 'kafkajs', txn_id: f['txn-id'] });

  const kafka = new Kafka({ clientId: `eos-${f.name}`, brokers: f.bootstrap.split(','), logLevel: logLevel.WARN });
  const producer = kafka.producer({
    transactionalId: f['txn-id'], idempotent: true, maxInFlightRequests: 1, transactionTimeout: 10000,
  });
  const consumer = kafka.consumer({
    groupId: f.group, sessionTimeout: 6000, heartbeatInterval: 1000, rebalanceTimeout: 15000, maxWaitTimeInMs: 500,
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    record({ ev: 'assigned', gen: -1, parts: (e.payload.memberAssignment || {})[f.from] || [] });
  });
  consumer.on(consumer.events.CRASH, (e) => {
    if (!e.payload.restart) {
      console.error('consumer crashed for good:', e.payload.error);
      process.exit(1);
    }
  });
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topics: [f.from], fromBeginning: true });

  let stopping = false;
  let seq = 0;
  const stop = async (code) => {
    if (stopping) return;
    stopping = true;
    try {
      await consumer.disconnect();
      await producer.disconnect();
    } catch (e) {
      console.error('disconnect:', e);
    }
    if (code === 0) record({ ev: 'stop' });
    process.exit(code);
  };
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));

  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      const p = batch.partition;
      for (let lo = 0; lo < batch.messages.length; lo += batchMax) {
        if (!isRunning() || isStale() || stopping) return;
        const chunk = batch.messages.slice(lo, lo + batchMax);
        const id = `${f.name}/${seq++}`;
        const ins = chunk.map((m) => ({ p, o: parseInt(m.offset, 10), v: m.value.toString() }));
        const outs = ins.map((c) => ({ p, v: `${c.v}|${id}` }));
        const txn = await producer.transaction();
        record({ ev: 'txn', id, in: ins, out: outs });
        let asked = false;
        try {
          await txn.send({ topic: f.to, messages: outs.map((o) => ({ partition: o.p, value: o.v })) });
          const next = String(ins[ins.length - 1].o + 1);
          await txn.sendOffsets({ consumerGroupId: f.group, topics: [{ topic: f.from, partitions: [{ partition: p, offset: next }] }] });
          if (random() < abortP) {
            await txn.abort();
            record({ ev: 'end', id, outcome: 'aborted' });
            consumer.seek({ topic: f.from, partition: p, offset: String(ins[0].o) });
            return;
          }
          record({ ev: 'commit', id });
          asked = true;
          await txn.commit();
        } catch (e) {
          if (asked) {
            record({ ev: 'end', id, outcome: 'unknown', err: String(e) });
          } else {
            try { await txn.abort(); } catch (_) { /* fenced or gone: never asked to commit either way */ }
            record({ ev: 'end', id, outcome: 'aborted', err: String(e) });
          }
          // Exit as a crashed application would (a disconnect here
          // would wait for this very eachBatch); eosrun restarts it.
          console.error(`txn ${id}:`, e);
          process.exit(1);
        }
        record({ ev: 'end', id, outcome: 'committed' });
        resolveOffset(chunk[chunk.length - 1].offset);
        // A rebalance shows up here as an error: KafkaJS rejoins.
        await heartbeat();
        if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
      }
    },
  });
}

main().catch((e) => {
  console.error('eos_kafkajs failed:', e);
  process.exit(1);
});
