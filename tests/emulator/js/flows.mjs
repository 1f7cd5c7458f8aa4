// One Service Bus flow per run, as an application written against @azure/service-bus would do
// it: `node flows.mjs <connection string> <flow>`. Prints what the flow saw as one JSON line.
// Written for sbnotebook's tests (tests/emulator/test_js_sdk.py); entity names are the test topology's.
import { ServiceBusClient as ServiceBusClient710 } from "@azure/service-bus-7.10";
import { adminClient, args, client, connectionString, run, text } from "./common.mjs";

const [flow] = args;
const WAIT = { maxWaitTimeInMs: 3000 };

const flows = {
  // A message sent without an id: the broker stamps one, which settling needs.
  async "message-id"(sb) {
    await sb.createSender("q").sendMessages([{ body: "no id" }, { body: "with id", messageId: "mine" }]);
    const receiver = sb.createReceiver("q");
    const peeked = await receiver.peekMessages(10);
    const received = await receiver.receiveMessages(2, WAIT);
    for (const m of received) await receiver.completeMessage(m);
    return {
      peeked: peeked.map((m) => m.messageId ?? null),
      received: received.map((m) => m.messageId ?? null),
    };
  },

  // Management operations answer on the client's unique reply-to link.
  async peek(sb) {
    await sb.createSender("q").sendMessages([1, 2, 3].map((n) => ({ body: `m${n}`, messageId: `id-${n}` })));
    const peeked = await sb.createReceiver("q").peekMessages(10);
    return { bodies: peeked.map((m) => text(m.body)), sequenceNumbers: peeked.map((m) => Number(m.sequenceNumber)) };
  },

  // Send, then a receive loop with subscribe(): every message handled and completed.
  async subscribe(sb) {
    const bodies = ["a", "b", "c", "d"];
    await sb.createSender("q").sendMessages(bodies.map((body) => ({ body })));
    const receiver = sb.createReceiver("q");
    const seen = [];
    await new Promise((resolve, reject) => {
      const subscription = receiver.subscribe(
        {
          async processMessage(m) {
            seen.push(text(m.body));
            if (seen.length === bodies.length) subscription.close().then(resolve, reject);
          },
          async processError(args) {
            reject(args.error);
          },
        },
        { autoCompleteMessages: true },
      );
    });
    await receiver.close();
    const left = await sb.createReceiver("q").peekMessages(10);
    return { seen, left: left.length };
  },

  // Schedule two messages, cancel one; the other shows as scheduled on a peek.
  async schedule(sb) {
    const sender = sb.createSender("q");
    const later = new Date(Date.now() + 60 * 60 * 1000);
    const [keep, drop] = await sender.scheduleMessages([{ body: "keep" }, { body: "drop" }], later);
    await sender.cancelScheduledMessages(drop);
    const peeked = await sb.createReceiver("q").peekMessages(10);
    return {
      sequenceNumbers: [Number(keep), Number(drop)],
      peeked: peeked.map((m) => ({ body: text(m.body), state: m.state, messageId: m.messageId ?? null })),
    };
  },

  // Session receiver: state set and read back, the session's message received.
  async "session-state"(sb) {
    await sb.createSender("sq60").sendMessages({ body: "in session", sessionId: "s-1" });
    const receiver = await sb.acceptSession("sq60", "s-1");
    await receiver.setSessionState("step 2");
    const state = await receiver.getSessionState();
    const [m] = await receiver.receiveMessages(1, WAIT);
    await receiver.completeMessage(m);
    await receiver.renewSessionLock();
    await receiver.close();
    return { state: text(state), body: text(m.body), sessionId: m.sessionId };
  },

  // Defer a message, fetch it back by sequence number, complete it.
  async deferral(sb) {
    await sb.createSender("q").sendMessages({ body: "later", messageId: "d-1" });
    const receiver = sb.createReceiver("q");
    const [m] = await receiver.receiveMessages(1, WAIT);
    await receiver.deferMessage(m);
    const [back] = await receiver.receiveDeferredMessages([m.sequenceNumber]);
    await receiver.renewMessageLock(back);
    await receiver.completeMessage(back);
    const left = await receiver.peekMessages(10);
    return { deferred: text(back.body), state: back.state, left: left.length };
  },

  // Dead-letter with a reason, read it from the dead-letter sub-queue.
  async "dead-letter"(sb) {
    await sb.createSender("q").sendMessages({ body: "poison" });
    const receiver = sb.createReceiver("q");
    const [m] = await receiver.receiveMessages(1, WAIT);
    await receiver.deadLetterMessage(m, { deadLetterReason: "bad", deadLetterErrorDescription: "cannot parse" });
    const dlq = sb.createReceiver("q", { subQueueType: "deadLetter" });
    const [dead] = await dlq.receiveMessages(1, WAIT);
    await dlq.completeMessage(dead);
    return {
      body: text(dead.body),
      reason: dead.deadLetterReason,
      description: dead.deadLetterErrorDescription,
      sameId: dead.messageId === m.messageId && Boolean(m.messageId),
    };
  },

  // The rule manager (AMQP add-rule / remove-rule / enumerate-rules), then filtered delivery.
  async rules(sb) {
    const rules = sb.createRuleManager("t", "all");
    await rules.createRule("reds", { sqlExpression: "color = 'red'" }, { sqlExpression: "SET seen = 'yes'" });
    await rules.createRule("eu", { subject: "order", applicationProperties: { region: "eu" } });
    await rules.deleteRule("$Default");
    const listed = [];
    for await (const rule of rules.listRules()) listed.push(rule);
    let duplicate = null;
    try {
      await rules.createRule("reds", { sqlExpression: "1=1" });
    } catch (err) {
      duplicate = err.code ?? err.name;
    }
    let missing = null;
    try {
      await rules.deleteRule("no-such-rule");
    } catch (err) {
      missing = err.code ?? err.name;
    }
    await sb.createSender("t").sendMessages([
      { body: "red", applicationProperties: { color: "red" } },
      { body: "blue", applicationProperties: { color: "blue" } },
      { body: "eu order", subject: "order", applicationProperties: { region: "eu" } },
    ]);
    const receiver = sb.createReceiver("t", "all", { receiveMode: "receiveAndDelete" });
    const got = await receiver.receiveMessages(2, WAIT);
    const left = await receiver.peekMessages(10);
    return {
      left: left.map((m) => text(m.body)),
      listed: listed.map((r) => ({ name: r.name, filter: r.filter, action: r.action })),
      duplicate,
      missing,
      delivered: got.map((m) => ({ body: text(m.body), seen: m.applicationProperties?.seen ?? null })),
    };
  },

  // Microsoft's deleteMessages.js sample (7.10): deleteMessages and purgeMessages, then both on
  // the empty queue, where Service Bus answers 204 with com.microsoft:message-not-found.
  async "delete-messages"(sb) {
    await sb.createSender("q").sendMessages(["a", "b", "c"].map((body) => ({ body })));
    const sb710 = new ServiceBusClient710(connectionString, { retryOptions: { maxRetries: 0, timeoutInMs: 10000 } });
    try {
      const receiver = sb710.createReceiver("q");
      const deleted = await receiver.deleteMessages({ maxMessageCount: 2 });
      const purged = await receiver.purgeMessages();
      const deletedWhenEmpty = await receiver.deleteMessages({ maxMessageCount: 10 });
      const purgedWhenEmpty = await receiver.purgeMessages();
      return { deleted, purged, deletedWhenEmpty, purgedWhenEmpty };
    } finally {
      await sb710.close();
    }
  },

  // The administration client: names read back from the entries' ids, SQL filter parameters.
  async admin() {
    const admin = adminClient();
    const created = await admin.createSubscription("t", "JsSub");
    const got = await admin.getSubscription("t", "JsSub");
    const subscriptions = [];
    for await (const s of admin.listSubscriptions("t")) subscriptions.push(`${s.topicName}/${s.subscriptionName}`);
    await admin.createRule("t", "JsSub", "param", { sqlExpression: "color = @color", sqlParameters: { "@color": "red" } });
    const rule = await admin.getRule("t", "JsSub", "param");
    const rules = [];
    for await (const r of admin.listRules("t", "JsSub")) rules.push(r.name);
    return {
      created: `${created.topicName}/${created.subscriptionName}`,
      got: `${got.topicName}/${got.subscriptionName}`,
      subscriptions,
      rule: { name: rule.name, filter: rule.filter },
      rules,
    };
  },
};

await run(async () => {
  const body = flows[flow];
  if (!body) throw new Error(`unknown flow '${flow}'; known: ${Object.keys(flows).join(", ")}`);
  const sb = client();
  try {
    return await body(sb);
  } finally {
    await sb.close();
  }
});
