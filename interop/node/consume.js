// Runs Apache's RocketMQ 5 Node.js SimpleConsumer against raftmq, as
// interop/node_test.go asks (plan as JSON in argv[2]): starts it, receives
// once (after holdMs), and prints {started, received, error} as JSON on
// stdout.
'use strict';

const { SimpleConsumer } = require('rocketmq-client-nodejs');

const quiet = { info() {}, debug() {}, warn() {}, error() {} };

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const out = { started: false, received: 0, error: '' };
  const consumer = new SimpleConsumer({ endpoints: plan.endpoints, consumerGroup: plan.group, logger: quiet,
    subscriptions: new Map([ [ plan.topic, '*' ] ]), awaitDuration: 3000, requestTimeout: 5000 });
  await consumer.startup();
  out.started = true;
  // Stay connected a while (the test lists the group's connections).
  await new Promise(r => setTimeout(r, plan.holdMs || 0));
  try {
    const msgs = await consumer.receive(16, 15000);
    out.received = msgs.length;
  } catch (err) {
    out.error = `${err && err.message}`;
  }
  try {
    await consumer.shutdown();
  } catch (err) {
    // reported by the receive already, if it matters
  }
  return out;
}

main().then(out => process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0)), err => {
  console.error(`consume.js: ${err && err.stack || err}`);
  process.exit(1);
});
