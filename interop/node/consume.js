// Runs Apache's RocketMQ 5 Node.js SimpleConsumer against raftmq, as
// interop/node_test.go asks (plan as JSON in argv[2]): starts it,
// receives and acks until it has want messages or forMs passed, stays
// connected holdMs more, and prints {started, received, acked, bodies,
// error} as JSON on stdout.
'use strict';

const { SimpleConsumer } = require('rocketmq-client-nodejs');

const quiet = { info() {}, debug() {}, warn() {}, error() {} };

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const out = { started: false, received: 0, error: '' };
  const consumer = new SimpleConsumer({ endpoints: plan.endpoints, consumerGroup: plan.group, logger: quiet,
    subscriptions: new Map([ [ plan.topic, '*' ] ]), awaitDuration: 3000, requestTimeout: 5000,
    sslEnabled: plan.ssl === true });
  await consumer.startup();
  out.started = true;
  // Receive and ack until want messages came or forMs passed.
  out.bodies = [];
  out.acked = 0;
  const deadline = Date.now() + (plan.forMs || 0);
  do {
    let msgs;
    try {
      msgs = await consumer.receive(16, 15000);
    } catch (err) {
      out.error = `${err && err.message}`;
      break;
    }
    out.received += msgs.length;
    for (const m of msgs) {
      out.bodies.push(m.body.toString());
      await consumer.ack(m);
      out.acked++;
    }
  } while (out.bodies.length < (plan.want || 0) && Date.now() < deadline);
  // Stay connected a while (the test lists the group's connections).
  await new Promise(r => setTimeout(r, plan.holdMs || 0));
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
