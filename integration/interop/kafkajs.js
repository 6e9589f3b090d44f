// KafkaJS 2.2.4 against `txncoord up` (run.sh): one committed and one aborted
// transaction, plus an idempotent (non-transactional) send, which makes
// KafkaJS send InitProducerId with a null transactional id to the Metadata
// ControllerID. KafkaJS speaks Metadata v6 (non-flexible), InitProducerId v1,
// AddPartitionsToTxn v1, EndTxn v1, Produce v7.
//
// Usage: node kafkajs.js BOOTSTRAP TOPIC TXN_ID VALUE_PREFIX
//
// KafkaJS's BrokerPool gives every broker the seed broker's ApiVersions
// table (brokerPool.js: `versions: this.versions`), so it works only because
// every txncoord node advertises every API of the cluster, as Kafka brokers
// do (cluster/not_served.go).
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [broker, topic, txnId, prefix] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'txncoord-interop-kafkajs', brokers: [broker], logLevel: logLevel.WARN });

  const txp = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 });
  await txp.connect();
  let txn = await txp.transaction();
  await txn.send({ topic, messages: [{ value: `${prefix}-commit-1`, partition: 0 }, { value: `${prefix}-commit-2`, partition: 1 }] });
  await txn.commit();
  txn = await txp.transaction();
  await txn.send({ topic, messages: [{ value: `${prefix}-abort-1`, partition: 0 }, { value: `${prefix}-abort-2`, partition: 1 }] });
  await txn.abort();
  await txp.disconnect();

  const idem = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await idem.connect();
  await idem.send({ topic, acks: -1, messages: [{ value: `${prefix}-idempotent-1`, partition: 2 }] });
  await idem.disconnect();
  console.log(`kafkajs (${prefix}): committed 2, aborted 2, idempotent 1`);
}

main().catch((e) => {
  console.error('kafkajs failed:', e);
  process.exit(1);
});
