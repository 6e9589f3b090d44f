// KafkaJS 2.2.4's admin client against `txncoord up` (run.sh): createTopics
// with a config, fetchTopicMetadata, describeConfigs (the topic's own value
// and its source), createTopics of an existing topic (false), deleteTopics,
// and the topic gone from listTopics. Exits non-zero on any mismatch.
//
// Usage: node kafkajs_admin.js BOOTSTRAP TOPIC
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

function check(cond, what) {
  if (!cond) {
    throw new Error(`kafkajs admin: ${what}`);
  }
}

async function main() {
  const [broker, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'txncoord-interop-kafkajs-admin', brokers: [broker], logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();

  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
  });
  check(created === true, `createTopics ${topic}: ${created}, want true`);
  const again = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] });
  check(again === false, `createTopics of an existing topic: ${again}, want false`);

  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  const t = md.topics.find((x) => x.name === topic);
  check(t && t.partitions.length === 3, `fetchTopicMetadata: ${JSON.stringify(md)}`);
  for (const p of t.partitions) {
    check(p.partitionErrorCode === 0 && p.leader > 0 && p.replicas.length === 1 && p.replicas[0] === p.leader,
      `partition ${JSON.stringify(p)}`);
  }

  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }],
  });
  const res = described.resources[0];
  check(res.errorCode === 0, `describeConfigs: error ${res.errorCode} ${res.errorMessage}`);
  const byName = Object.fromEntries(res.configEntries.map((c) => [c.configName, c]));
  check(byName['retention.ms'] && byName['retention.ms'].configValue === '3600000' && byName['retention.ms'].isDefault === false,
    `retention.ms: ${JSON.stringify(byName['retention.ms'])}`);
  check(byName['cleanup.policy'] && byName['cleanup.policy'].configValue === 'delete' && byName['cleanup.policy'].isDefault === true,
    `cleanup.policy: ${JSON.stringify(byName['cleanup.policy'])}`);

  await admin.deleteTopics({ topics: [topic], timeout: 10000 });
  const listed = await admin.listTopics();
  check(!listed.includes(topic), `listTopics after deleteTopics still has ${topic}: ${listed}`);
  await admin.disconnect();
  console.error(`kafkajs admin: created ${topic} (3 partitions, retention.ms), metadata, describeConfigs, deleted`);
}

main().catch((e) => {
  console.error(e.stack || e);
  process.exit(1);
});
