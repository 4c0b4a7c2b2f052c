// Conformance check: drives a full conversation through the official Parlant
// TypeScript client (npm `parlant-client`, pinned in package.json) and nothing else.
//
//   GUIDEPOST_URL=http://127.0.0.1:8800 node conversation.mjs
//
// Optional env: TURN_TIMEOUT_S (default 120) bounds each agent turn,
// POLL_WAIT_S (default 30) is the wait_for_data of each long poll.
// Prints one line per step; exits 1 on the first failure with a clear message.
import { ParlantClient, Parlant, ParlantError, ParlantTimeoutError } from 'parlant-client';

const BASE = process.env.GUIDEPOST_URL;
const TURN_TIMEOUT_S = Number(process.env.TURN_TIMEOUT_S || 120);
const POLL_WAIT_S = Number(process.env.POLL_WAIT_S || 30);
const REQUEST_TIMEOUT_S = 120; // for every non-polling call: a hang guard, not a measure

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
let stepNo = 0;

class CheckFailed extends Error {}

function ok(msg) {
  stepNo += 1;
  console.log(`ok ${String(stepNo).padStart(2)} [${elapsed()}] ${msg}`);
}

function check(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}

function describeError(e) {
  if (e instanceof ParlantTimeoutError) return 'client timeout (no answer in time)';
  if (e instanceof ParlantError) {
    const body = e.body === undefined ? '' : ` body=${JSON.stringify(e.body)}`;
    const status = e.statusCode === undefined ? '' : ` status=${e.statusCode}`;
    const hint = e.statusCode === undefined ? ` ${e.message} (no HTTP answer: is a server listening at ${BASE}?)` : '';
    return `${e.constructor.name}:${status}${body}${hint}`;
  }
  if (e && e.cause) return `${e.message} (cause: ${e.cause.message || e.cause})`;
  return e && e.stack ? e.stack : String(e);
}

// Run one step; on any exception, name the step that failed.
async function step(name, fn) {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof CheckFailed) throw new CheckFailed(`${name}: ${e.message}`);
    throw new CheckFailed(`${name}: ${describeError(e)}`);
  }
}

const opts = { timeoutInSeconds: REQUEST_TIMEOUT_S, maxRetries: 0 };

function isDate(d) {
  return d instanceof Date && !Number.isNaN(d.getTime());
}

function statusOf(ev) {
  const d = ev.data || {};
  return { status: d.status, stage: d.data && d.data.stage };
}

function isTurnEnd(ev) {
  if (ev.kind !== 'status') return false;
  const { status, stage } = statusOf(ev);
  return status === 'ready' && stage === 'completed';
}

function checkEventShape(ev, where) {
  check(typeof ev.id === 'string' && ev.id.length > 0, `${where}: event without id`);
  check(Number.isInteger(ev.offset), `${where}: event ${ev.id} offset ${ev.offset} is not an integer`);
  check(isDate(ev.creationUtc), `${where}: event ${ev.id} creationUtc is not a date`);
  check(typeof ev.traceId === 'string' && ev.traceId.length > 0, `${where}: event ${ev.id} has no traceId`);
  check(
    ev.correlationId === ev.traceId,
    `${where}: event ${ev.id} (offset ${ev.offset}, ${ev.kind}) correlationId ${JSON.stringify(ev.correlationId)} != traceId ${JSON.stringify(ev.traceId)}`,
  );
  check(ev.deleted === false, `${where}: event ${ev.id} is marked deleted`);
  check(ev.metadata !== null && typeof ev.metadata === 'object', `${where}: event ${ev.id} has no metadata object`);
}

function short(ev) {
  const d = ev.data || {};
  if (ev.kind === 'status') {
    const { status, stage } = statusOf(ev);
    return `#${ev.offset} status ${status}${stage ? `/${stage}` : ''}`;
  }
  if (ev.kind === 'message') {
    const text = typeof d.message === 'string' ? d.message : '';
    return `#${ev.offset} message ${ev.source} ${JSON.stringify(text.length > 50 ? `${text.slice(0, 50)}…` : text)}`;
  }
  return `#${ev.offset} ${ev.kind} ${ev.source}`;
}

const client = new ParlantClient({ environment: BASE });
const log = []; // every event seen, in offset order
let nextOffset = 0;

// Long-polls from nextOffset until the turn started by `msg` ends, checking each event.
async function awaitTurn(label, msg) {
  const deadline = Date.now() + TURN_TIMEOUT_S * 1000;
  const turnEvents = [];
  let polls = 0;
  let timeouts = 0;
  for (;;) {
    const left = Math.floor((deadline - Date.now()) / 1000);
    if (left <= 0) {
      throw new CheckFailed(
        `no ready/completed status within ${TURN_TIMEOUT_S}s (${polls} polls, ${timeouts} answered 504); events seen this turn: ${
          turnEvents.map(short).join('; ') || 'none'
        }`,
      );
    }
    const wait = Math.max(1, Math.min(POLL_WAIT_S, left));
    polls += 1;
    let batch;
    try {
      batch = await client.sessions.listEvents(
        sessionId,
        { minOffset: nextOffset, waitForData: wait },
        { timeoutInSeconds: wait + 15, maxRetries: 0 },
      );
    } catch (e) {
      if (e instanceof Parlant.GatewayTimeoutError) {
        timeouts += 1; // nothing new within `wait` seconds: poll again
        continue;
      }
      throw e;
    }
    check(Array.isArray(batch), `listEvents returned ${typeof batch}, not an array`);
    check(batch.length > 0, `listEvents(min_offset=${nextOffset}, wait_for_data=${wait}) answered 200 [] instead of waiting (or 504)`);
    for (const ev of batch) {
      checkEventShape(ev, label);
      check(
        ev.offset === nextOffset,
        `offsets not dense: expected offset ${nextOffset}, got ${ev.offset} (${short(ev)})`,
      );
      nextOffset += 1;
      log.push(ev);
      turnEvents.push(ev);
    }
    const end = turnEvents.find((ev) => ev.offset > msg.offset && isTurnEnd(ev));
    if (end) return { end, turnEvents, polls, timeouts };
  }
}

async function turn(n, text) {
  const msg = await step(`turn ${n}: post customer message`, async () => {
    const ev = await client.sessions.createEvent(
      sessionId,
      { kind: 'message', source: 'customer', message: text },
      opts,
    );
    checkEventShape(ev, 'createEvent');
    check(ev.kind === 'message' && ev.source === 'customer', `got kind=${ev.kind} source=${ev.source}`);
    check(ev.data && ev.data.message === text, `data.message is ${JSON.stringify(ev.data && ev.data.message)}`);
    check(ev.offset >= nextOffset, `new message has offset ${ev.offset}, below ${nextOffset} already seen`);
    return ev;
  });
  ok(`turn ${n}: posted customer message ${msg.id} at offset ${msg.offset} (trace ${msg.traceId})`);

  const { end, turnEvents, polls, timeouts } = await step(`turn ${n}: long-poll events`, () =>
    awaitTurn(`turn ${n}`, msg),
  );
  ok(
    `turn ${n}: ready/completed status at offset ${end.offset} after ${polls} poll(s) (${timeouts} x 504); ${turnEvents.length} events, offsets dense, correlationId == traceId on all`,
  );

  await step(`turn ${n}: check events`, async () => {
    const posted = turnEvents.find((ev) => ev.id === msg.id);
    check(posted, `the customer message ${msg.id} (offset ${msg.offset}) was not returned by listEvents`);
    const agentTrace = end.traceId;
    const reply = turnEvents.filter(
      (ev) => ev.kind === 'message' && ev.source === 'ai_agent' && ev.offset > msg.offset,
    );
    check(reply.length > 0, `no ai_agent message before the turn ended: ${turnEvents.map(short).join('; ')}`);
    for (const r of reply) {
      check(typeof r.data?.message === 'string', `ai_agent message ${r.id} has no data.message string`);
      check(
        r.traceId === agentTrace,
        `ai_agent message ${r.id} trace ${r.traceId} differs from the completing status's trace ${agentTrace}`,
      );
    }
    const sameTrace = turnEvents.filter((ev) => ev.offset > msg.offset && ev.traceId === agentTrace);
    const statuses = sameTrace.filter((ev) => ev.kind === 'status').map((ev) => {
      const { status, stage } = statusOf(ev);
      return stage ? `${status}/${stage}` : status;
    });
    const completedData = end.data && end.data.data;
    for (const key of ['matched_guidelines', 'matched_journeys', 'matched_journey_states']) {
      check(
        completedData && key in completedData,
        `the ready/completed status lacks data.data.${key}: ${JSON.stringify(end.data)}`,
      );
    }
    ok(
      `turn ${n}: ${reply.length} ai_agent message(s), e.g. ${JSON.stringify(String(reply[0].data.message).slice(0, 60))}; ` +
        `turn trace ${agentTrace} (${agentTrace === msg.traceId ? 'same as' : 'differs from'} the customer message's); statuses ${statuses.join(', ')}`,
    );
  });
}

let sessionId;

async function main() {
  if (!BASE) throw new CheckFailed('GUIDEPOST_URL is not set (e.g. GUIDEPOST_URL=http://127.0.0.1:8800)');
  console.log(`conversation.mjs: parlant-client against ${BASE}`);
  const tag = `${Date.now().toString(36)}`;

  const agent = await step('create agent', async () => {
    const a = await client.agents.create({ name: `conformance-agent-${tag}`, description: 'Node client conformance test' }, opts);
    check(typeof a.id === 'string' && a.id, 'agent has no id');
    check(a.name === `conformance-agent-${tag}`, `agent name ${a.name}`);
    check(typeof a.compositionMode === 'string', `agent compositionMode ${a.compositionMode}`);
    return a;
  });
  ok(`created agent ${agent.id}`);

  const customer = await step('create customer', async () => {
    const c = await client.customers.create({ name: `conformance-customer-${tag}`, metadata: { suite: 'node' } }, opts);
    check(typeof c.id === 'string' && c.id, 'customer has no id');
    check(isDate(c.creationUtc), 'customer creationUtc not a date');
    return c;
  });
  ok(`created customer ${customer.id}`);

  const session = await step('create session', async () => {
    const s = await client.sessions.create(
      { agentId: agent.id, customerId: customer.id, allowGreeting: false, title: `conformance ${tag}` },
      opts,
    );
    check(typeof s.id === 'string' && s.id, 'session has no id');
    check(s.agentId === agent.id, `session agentId ${s.agentId} != ${agent.id}`);
    check(s.customerId === customer.id, `session customerId ${s.customerId} != ${customer.id}`);
    check(isDate(s.creationUtc), 'session creationUtc not a date');
    return s;
  });
  sessionId = session.id;
  ok(`created session ${sessionId} (mode ${session.mode})`);

  await step('empty session long poll', async () => {
    const evs = await client.sessions.listEvents(sessionId, { minOffset: 0, waitForData: 0 }, opts);
    check(Array.isArray(evs), 'listEvents did not return an array');
    check(evs.length === 0, `a new session without greeting has ${evs.length} events: ${evs.map(short).join('; ')}`);
  });
  ok('listEvents(wait_for_data=0) on the new session answers []');

  await turn(1, 'Hello! Can you tell me what you can help me with?');
  await turn(2, 'Thanks. And what are your opening hours?');

  await step('read session back', async () => {
    const s = await client.sessions.retrieve(sessionId, opts);
    check(s.id === sessionId, `id ${s.id}`);
    check(s.agentId === agent.id && s.customerId === customer.id, `agent/customer ${s.agentId}/${s.customerId}`);
    check(s.title === `conformance ${tag}`, `title ${JSON.stringify(s.title)}`);
    check(s.consumptionOffsets && typeof s.consumptionOffsets === 'object', 'no consumptionOffsets object');
    ok(`read session back: title ${JSON.stringify(s.title)}, mode ${s.mode}, consumptionOffsets ${JSON.stringify(s.consumptionOffsets)}`);
  });

  await step('re-read whole event log', async () => {
    const all = await client.sessions.listEvents(sessionId, { minOffset: 0, waitForData: 0 }, opts);
    all.forEach((ev, i) => {
      checkEventShape(ev, 'full log');
      check(ev.offset === i, `full log: event ${i} has offset ${ev.offset}`);
    });
    check(all.length >= log.length, `full log has ${all.length} events, fewer than the ${log.length} seen while polling`);
    for (const ev of log) {
      check(all[ev.offset] && all[ev.offset].id === ev.id, `full log: offset ${ev.offset} is ${all[ev.offset]?.id}, was ${ev.id}`);
    }
    const msgs = all.filter((ev) => ev.kind === 'message').map((ev) => ev.source);
    ok(`full log: ${all.length} events, offsets 0..${all.length - 1}; messages by ${msgs.join(', ')}`);
  });

  await step('delete session', async () => {
    await client.sessions.delete(sessionId, opts);
    try {
      await client.sessions.retrieve(sessionId, opts);
    } catch (e) {
      if (e instanceof Parlant.NotFoundError) return;
      throw e;
    }
    throw new CheckFailed('session still readable after delete (expected 404)');
  });
  ok(`deleted session ${sessionId}; reading it now answers 404`);

  await step('clean up', async () => {
    await client.customers.delete(customer.id, opts);
    await client.agents.delete(agent.id, opts);
  });
  ok('deleted customer and agent');
  console.log(`PASS conversation.mjs (${stepNo} steps, ${elapsed()})`);
}

main().then(
  () => process.exit(0),
  (e) => {
    const msg = e instanceof CheckFailed ? e.message : describeError(e);
    console.error(`FAIL conversation.mjs [${elapsed()}]: ${msg}`);
    process.exit(1);
  },
);
