// Sends messages to raftmq with Apache's RocketMQ 5 Node.js client
// (rocketmq-client-nodejs), as interop/node_test.go asks: the plan comes as
// JSON in argv[2]; what was sent is printed as one JSON object on stdout.
// Every failure exits non-zero with the client's error on stderr.
'use strict';

const { Producer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const quiet = { info() {}, debug() {}, warn() {}, error(...a) { console.error(...a); } };

async function main() {
  const plan = JSON.parse(process.argv[2]);
  const out = { normal: [], fifo: [], delay: [], recalled: [], commit: [], rollback: [], checked: [], checks: 0 };
  const options = { endpoints: plan.endpoints, topic: plan.topics, logger: quiet, requestTimeout: 5000 };
  if (plan.accessKey) {
    options.sessionCredentials = { accessKey: plan.accessKey, accessSecret: plan.secretKey };
  }
  if (plan.ssl) {
    options.sslEnabled = true;
  }
  options.checker = {
    // The broker asks about the transactions left open: commit them.
    async check(view) {
      out.checks++;
      out.checked.push(view.body.toString());
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer(options);
  await producer.startup();
  try {
    for (let i = 0; i < (plan.normal || 0); i++) {
      const body = `${plan.prefix}n${i}`;
      const r = await producer.send({ topic: plan.topic, tag: 'TagA', keys: [ `key-${i}` ],
        properties: new Map([ [ 'origin', 'nodejs' ] ]), body: Buffer.from(body) });
      out.normal.push({ body, id: r.messageId });
    }
    for (let i = 0; i < (plan.fifo || 0); i++) {
      const body = `${plan.prefix}f${i}`;
      const r = await producer.send({ topic: plan.topic, messageGroup: `group-${i % 2}`, body: Buffer.from(body) });
      out.fifo.push({ body, id: r.messageId, group: `group-${i % 2}` });
    }
    for (let i = 0; i < (plan.delay || 0); i++) {
      const body = `${plan.prefix}d${i}`;
      const sentAt = Date.now();
      const r = await producer.send({ topic: plan.topic, delay: plan.delayMs, body: Buffer.from(body) });
      out.delay.push({ body, id: r.messageId, due: sentAt + plan.delayMs, handle: r.recallHandle });
    }
    // Delay messages recalled at once (Producer.recallMessage): never
    // delivered.
    for (let i = 0; i < (plan.recall || 0); i++) {
      const body = `${plan.prefix}r${i}`;
      const r = await producer.send({ topic: plan.topic, delay: plan.recallDelayMs, body: Buffer.from(body) });
      const rr = await producer.recallMessage(plan.topic, r.recallHandle);
      out.recalled.push({ body, id: r.messageId, recalledId: rr.messageId });
    }
    for (const kind of (plan.transactions || [])) {
      const body = `${plan.prefix}t-${kind}`;
      const tx = producer.beginTransaction();
      const r = await producer.send({ topic: plan.topic, body: Buffer.from(body) }, tx);
      if (kind === 'commit') {
        await tx.commit();
        out.commit.push({ body, id: r.messageId });
      } else if (kind === 'rollback') {
        await tx.rollback();
        out.rollback.push({ body, id: r.messageId });
      }
      // 'check': left open; the broker checks back, the checker commits.
    }
    // FIFO sends of six message groups one at a time for fifoForMs,
    // through whatever happens to the group (the test kills the leader
    // meanwhile): acknowledged ones are listed in order, failures counted.
    out.loop = [];
    out.loopFailed = 0;
    const loopEnd = Date.now() + (plan.fifoForMs || 0);
    for (let i = 0; Date.now() < loopEnd; i++) {
      const body = `${plan.prefix}L${i}`;
      const group = `lg-${i % 6}`;
      try {
        const r = await producer.send({ topic: plan.topic, messageGroup: group, body: Buffer.from(body) });
        out.loop.push({ body, id: r.messageId, group, at: Date.now() });
      } catch (err) {
        out.loopFailed++;
        console.error(`send ${body}: ${err && err.message}`);
        await new Promise(r => setTimeout(r, 100));
      }
    }
    // A recall once the delay messages are due (and delivered) fails.
    if (plan.recallLate && out.delay.length > 0) {
      await new Promise(r => setTimeout(r, Math.max(out.delay[0].due + 1500 - Date.now(), 0)));
      try {
        await producer.recallMessage(plan.topic, out.delay[0].handle);
        out.lateRecallError = '';
      } catch (err) {
        out.lateRecallError = `${err && err.message}`;
      }
    }
    const deadline = Date.now() + (plan.waitChecksMs || 0);
    while (out.checks < (plan.wantChecks || 0) && Date.now() < deadline) {
      await new Promise(r => setTimeout(r, 200));
    }
    // Let the check-back's EndTransaction finish before shutting down.
    if (plan.wantChecks) {
      await new Promise(r => setTimeout(r, 500));
    }
  } finally {
    try {
      await producer.shutdown();
    } catch (err) {
      // A node the test killed does not hear of the shutdown.
      out.shutdownError = `${err && err.message}`;
    }
  }
  return out;
}

// Exit once stdout is flushed: a pipe's writes are asynchronous, and an
// early exit would cut the result short. (The client's timers would keep
// the process alive otherwise.)
main().then(out => process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0)), err => {
  console.error(`produce.js: ${err && err.stack || err}`);
  process.exit(1);
});
