// Runs Apache's RocketMQ 5 Node.js PushConsumer against raftmq, as
// interop/node_test.go asks (plan as JSON in argv[2]): consumes with a
// listener that succeeds until it has want messages or forMs passed, and
// prints {bodies} as JSON on stdout. With fail set, the listener fails
// every delivery and records it in attempts ({body, attempt}); it stops
// once it saw want deliveries (or forMs passed) and gives the client
// holdMs to forward the failed messages to the dead-letter queue.
'use strict';

const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const quiet = { info() {}, debug() {}, warn() {}, error() {} };

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const out = { bodies: [], attempts: [] };
  const consumer = new PushConsumer({ endpoints: plan.endpoints, consumerGroup: plan.group, logger: quiet,
    subscriptions: new Map([ [ plan.topic, '*' ] ]), requestTimeout: 5000,
    messageListener: { async consume(m) {
      if (plan.fail) {
        out.attempts.push({ body: m.body.toString(), attempt: m.deliveryAttempt });
        return ConsumeResult.FAILURE;
      }
      out.bodies.push(m.body.toString());
      return ConsumeResult.SUCCESS;
    } } });
  await consumer.startup();
  const deadline = Date.now() + (plan.forMs || 0);
  while ((plan.fail ? out.attempts : out.bodies).length < (plan.want || 0) && Date.now() < deadline) {
    await new Promise(r => setTimeout(r, 200));
  }
  if (plan.fail) {
    await new Promise(r => setTimeout(r, plan.holdMs || 0));
  }
  // Let the last acks go out before shutting down.
  await new Promise(r => setTimeout(r, 1000));
  try {
    await consumer.shutdown();
  } catch (err) {
    // nothing to report: the bodies are what the test checks
  }
  return out;
}

main().then(out => process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0)), err => {
  console.error(`push.js: ${err && err.stack || err}`);
  process.exit(1);
});
