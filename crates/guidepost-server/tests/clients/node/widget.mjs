// Conformance check: the official chat widget (npm `parlant-chat-react`) in headless
// Debian Chromium, talking cross-origin to the API server.
//
//   npm run build                      # once: bundles widget/index.jsx into widget/dist/
//   GUIDEPOST_URL=http://127.0.0.1:8800 node widget.mjs
//
// Env:
//   GUIDEPOST_URL     API server base URL (required)
//   SCREENSHOT        where to save the screenshot (default ./widget.png)
//   WIDGET_MODE       "float" (default: popup button, as embedded on sites) or "inline"
//   WIDGET_TIMEOUT_S  bound on waiting for each agent reply bubble (default 300: a hang guard,
//                     not a measure; a busy machine takes far longer than a quiet one)
//   OBSERVE_S         after the reply, keep watching the wire this many seconds (default 0)
//   WIRE_LOG          if set, write every request/response seen to this JSON file
//   CHROMIUM          browser binary (default /usr/bin/chromium)
//
// The page is served from a tiny static server on 127.0.0.1 (another port, hence another
// origin, than the API server), so every API call is a CORS request. Chromium resolves no
// host name but the local ones, so requests to any other host fail without leaving the
// machine; each attempt is reported, and any but the widget's own <link> to a web font
// stylesheet fails the test.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { ParlantClient } from 'parlant-client';

const here = path.dirname(fileURLToPath(import.meta.url));
const BASE = (process.env.GUIDEPOST_URL || '').replace(/\/+$/, '');
const SCREENSHOT = path.resolve(process.env.SCREENSHOT || './widget.png');
const MODE = process.env.WIDGET_MODE || 'float';
const TIMEOUT_S = Number(process.env.WIDGET_TIMEOUT_S || 300);
// How long the page, the browser and the API may take to answer before a step is given up:
// hang guards, generous enough for a busy machine.
const GUARD_MS = 120_000;
const OBSERVE_S = Number(process.env.OBSERVE_S || 0);
const WIRE_LOG = process.env.WIRE_LOG;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const KNOWN_EXTERNAL = ['https://fonts.googleapis.com/']; // <link> rendered by the widget itself
const MESSAGES = ['Hello from the widget conformance test', 'And a second question from the widget'];

const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(1);
const say = (msg) => console.log(`[${secs()}s] ${msg}`);

class CheckFailed extends Error {}

// ---------- static server for widget/ ----------
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};
function startStatic(root) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let rel = decodeURIComponent(url.pathname);
    if (rel === '/') rel = '/index.html';
    const file = path.join(root, path.normalize(rel));
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    fs.readFile(file, (err, body) => {
      if (err) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      res.writeHead(200, {
        'content-type': TYPES[path.extname(file)] || 'application/octet-stream',
        'cache-control': 'no-store',
      });
      res.end(body);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// ---------- wire recording ----------
const wire = []; // {t, method, url, status, ms, failure, headers, reqBody, resBody}
const consoleLines = [];
const blocked = [];
const pageErrors = [];

function trimUrl(u) {
  return u.startsWith(BASE) ? u.slice(BASE.length) || '/' : u;
}

function summarizeWire() {
  return wire
    .map((w) => {
      const st = w.failure ? `FAILED ${w.failure}` : w.status === undefined ? 'pending' : w.status;
      const dur = w.ms === undefined ? '' : ` ${w.ms}ms`;
      return `  +${w.t}s ${w.method} ${trimUrl(w.url)} -> ${st}${dur}`;
    })
    .join('\n');
}

let browser;
let userDataDir;
let staticServer;
let page;
let agentId;
let createdSession;
const client = BASE ? new ParlantClient({ environment: BASE }) : null;

async function cleanup() {
  try {
    if (browser) await browser.close();
  } catch {}
  // The browser's profile is this run's own: nothing of it stays behind.
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (staticServer) staticServer.close();
  if (client) {
    if (createdSession) await client.sessions.delete(createdSession, { maxRetries: 0, timeoutInSeconds: GUARD_MS / 1000 }).catch(() => {});
    if (agentId) await client.agents.delete(agentId, { maxRetries: 0, timeoutInSeconds: GUARD_MS / 1000 }).catch(() => {});
  }
}

async function main() {
  if (!BASE) throw new CheckFailed('GUIDEPOST_URL is not set (e.g. GUIDEPOST_URL=http://127.0.0.1:8800)');
  if (!['float', 'inline'].includes(MODE)) throw new CheckFailed(`WIDGET_MODE must be float or inline, not ${MODE}`);
  const widgetDir = path.join(here, 'widget');
  if (!fs.existsSync(path.join(widgetDir, 'dist', 'index.js'))) {
    throw new CheckFailed('widget/dist/index.js is missing: run `npm run build` first');
  }
  if (!fs.existsSync(CHROMIUM)) {
    throw new CheckFailed(`${CHROMIUM} not found: apt-get install -y chromium chromium-driver`);
  }
  console.log(`widget.mjs: parlant-chat-react (${MODE}) against ${BASE}`);

  // 1. the agent the widget will talk to
  try {
    const agent = await client.agents.create(
      { name: `Widget Agent ${Date.now().toString(36)}`, description: 'widget conformance test' },
      { maxRetries: 0, timeoutInSeconds: GUARD_MS / 1000 },
    );
    agentId = agent.id;
  } catch (e) {
    throw new CheckFailed(`creating the agent through parlant-client failed: ${e.message} (is a server listening at ${BASE}?)`);
  }
  say(`created agent ${agentId}`);

  // 2. page server on another origin
  staticServer = await startStatic(widgetDir);
  const pageOrigin = `http://127.0.0.1:${staticServer.address().port}`;
  const apiOrigin = new URL(BASE).origin;
  if (pageOrigin === apiOrigin) throw new CheckFailed('page and API would share an origin');
  const qs = new URLSearchParams({ server: BASE, agent: agentId, float: MODE === 'float' ? '1' : '0' });
  const pageUrl = `${pageOrigin}/index.html?${qs}`;
  say(`serving widget page at ${pageOrigin} (API origin ${apiOrigin})`);

  // 3. browser
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'guidepost-widget-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // No name resolves except the local ones: nothing can leave the machine. (Not
      // playwright's page.route(): while it intercepts, playwright answers CORS preflights
      // itself with a 204, so the API server's OPTIONS handling would go untested.)
      `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE ${new URL(BASE).hostname}`,
    ],
    viewport: { width: 1100, height: 900 },
  });
  browser = context;
  page = context.pages()[0] || (await context.newPage());

  const started = new Map();
  const originOf = (u) => {
    try {
      return new URL(u).origin;
    } catch {
      return u;
    }
  };
  context.on('request', (req) => {
    const rec = { t: secs(), method: req.method(), url: req.url(), start: Date.now() };
    const o = originOf(req.url());
    if (o !== pageOrigin && o !== apiOrigin && !req.url().startsWith('data:')) blocked.push(req.url());
    if (req.url().startsWith(apiOrigin)) {
      const h = req.headers();
      rec.headers = Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith('x-') || k === 'content-type'));
      rec.reqBody = req.postData() || undefined;
    }
    started.set(req, rec);
    if (!req.url().startsWith(pageOrigin)) wire.push(rec);
  });
  context.on('requestfinished', async (req) => {
    const rec = started.get(req);
    if (!rec) return;
    rec.ms = Date.now() - rec.start;
    const res = await req.response().catch(() => null);
    if (res) {
      rec.status = res.status();
      if (req.url().startsWith(apiOrigin)) {
        const hs = await res.allHeaders().catch(() => ({}));
        rec.acao = hs['access-control-allow-origin'];
        rec.resBody = await res.text().then((t) => t.slice(0, 2000)).catch(() => undefined);
      }
    }
  });
  context.on('requestfailed', (req) => {
    const rec = started.get(req);
    if (!rec) return;
    rec.ms = Date.now() - rec.start;
    rec.failure = req.failure()?.errorText || 'failed';
  });
  // CORS preflights are invisible to playwright's request events; the DevTools protocol shows them.
  const preflights = new Map();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  cdp.on('Network.requestWillBeSent', (e) => {
    if (e.request.method !== 'OPTIONS') return;
    const rec = {
      t: secs(),
      method: 'OPTIONS',
      url: e.request.url,
      start: Date.now(),
      headers: Object.fromEntries(
        Object.entries(e.request.headers).filter(([k]) => /^access-control-request-|^origin$/i.test(k)),
      ),
    };
    preflights.set(e.requestId, rec);
    wire.push(rec);
  });
  cdp.on('Network.responseReceived', (e) => {
    const rec = preflights.get(e.requestId);
    if (!rec) return;
    rec.status = e.response.status;
    rec.ms = Date.now() - rec.start;
    const h = Object.fromEntries(Object.entries(e.response.headers).map(([k, v]) => [k.toLowerCase(), v]));
    rec.acao = h['access-control-allow-origin'];
    rec.resHeaders = Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith('access-control-')));
  });
  cdp.on('Network.loadingFailed', (e) => {
    const rec = preflights.get(e.requestId);
    if (rec) rec.failure = `${e.errorText}${e.corsErrorStatus ? ` (${e.corsErrorStatus.corsError})` : ''}`;
  });
  page.on('console', (m) => consoleLines.push(`[${secs()}s] console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => pageErrors.push(`[${secs()}s] pageerror: ${e.message}`));

  // 4. load the page
  const resp = await page.goto(pageUrl, { waitUntil: 'load', timeout: GUARD_MS });
  if (!resp || resp.status() !== 200) throw new CheckFailed(`page load answered ${resp && resp.status()}`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: GUARD_MS }).catch(() => {
    throw new CheckFailed('the widget bundle did not run (document.body.dataset.ready never set)');
  });
  say(`page loaded: ${pageUrl}`);

  const textarea = page.locator('textarea[aria-label="Type your message"]');
  if (MODE === 'float') {
    const button = page.locator('#root button').first();
    await button.waitFor({ state: 'visible', timeout: GUARD_MS }).catch(() => {
      throw new CheckFailed('the floating chat button never appeared');
    });
    await button.click();
    say('clicked the floating chat button');
  }
  await textarea.waitFor({ state: 'visible', timeout: GUARD_MS }).catch(() => {
    throw new CheckFailed('the chat input never appeared');
  });
  say('chat is open');

  // 5. two turns: the first makes the widget create the session; the second goes to that
  // session while the widget's long poll is pending, so the poll must wake on the
  // customer's own message for its bubble to show.
  const sendButton = page.locator('button[aria-label="Send message"]');
  // An agent bubble: a message group not from "You"; its text sits in the aria-live="polite" div.
  const agentBubble = page.locator(
    '[role="group"][aria-label^="Message from "]:not([aria-label="Message from You"]) div[aria-live="polite"]',
  );
  const agentTexts = async () =>
    (await agentBubble.allInnerTexts().catch(() => [])).map((t) => t.trim()).filter(Boolean);
  for (const [i, text] of MESSAGES.entries()) {
    const n = i + 1;
    const before = (await agentTexts()).length;
    await textarea.click();
    await textarea.fill(text);
    await sendButton.click();
    say(`turn ${n}: sent ${JSON.stringify(text)}`);

    const deadline = Date.now() + TIMEOUT_S * 1000;
    const customerBubble = page.locator('[role="group"][aria-label="Message from You"]', { hasText: text });
    await customerBubble.first().waitFor({ state: 'visible', timeout: TIMEOUT_S * 1000 }).catch(() => {
      throw new CheckFailed(`turn ${n}: the customer's own message bubble did not appear within ${TIMEOUT_S}s`);
    });
    if (n === 1) {
      createdSession = await page.evaluate(() => document.body.dataset.sessionId || null);
      if (!createdSession) throw new CheckFailed('the widget did not report a created session (onSessionCreated)');
      say(`turn ${n}: customer bubble shown; the widget created session ${createdSession}`);
    } else {
      say(`turn ${n}: customer bubble shown`);
    }
    let texts;
    for (;;) {
      texts = await agentTexts();
      if (texts.length > before) break;
      if (Date.now() > deadline) throw new CheckFailed(`turn ${n}: no new agent reply bubble within ${TIMEOUT_S}s`);
      await page.waitForTimeout(250);
    }
    say(`turn ${n}: agent bubble shown: ${JSON.stringify(texts.at(-1).replace(/\s+/g, ' ').slice(0, 100))}`);
  }
  await page.waitForTimeout(1000); // let the typing indicator settle before the picture
  await page.screenshot({ path: SCREENSHOT });
  say(`screenshot saved to ${SCREENSHOT}`);

  if (OBSERVE_S > 0) {
    say(`observing the wire for ${OBSERVE_S}s more`);
    await page.waitForTimeout(OBSERVE_S * 1000);
  }

  // 7. wire checks
  const unexpected = blocked.filter((u) => !KNOWN_EXTERNAL.some((k) => u.startsWith(k)));
  if (unexpected.length) throw new CheckFailed(`the page tried to reach other hosts: ${unexpected.join(', ')}`);
  const api = wire.filter((w) => w.url.startsWith(apiOrigin));
  const noAcao = api.filter((w) => w.status !== undefined && !w.acao);
  if (noAcao.length) {
    throw new CheckFailed(`API responses without Access-Control-Allow-Origin: ${noAcao.map((w) => `${w.method} ${trimUrl(w.url)}`).join(', ')}`);
  }
  const cors = api.filter((w) => w.failure);
  say(`${api.length} API requests (${cors.length} failed in the browser), ${blocked.length} external request(s) attempted (and failed): ${blocked.join(', ') || 'none'}`);
  console.log(`wire:\n${summarizeWire()}`);
}

function dumpDiagnostics() {
  console.error('--- console messages ---');
  console.error(consoleLines.concat(pageErrors).join('\n') || '(none)');
  console.error('--- failed network requests ---');
  const failed = wire.filter((w) => w.failure || (w.status !== undefined && w.status >= 400));
  console.error(
    failed.map((w) => `  +${w.t}s ${w.method} ${w.url} -> ${w.failure || w.status}${w.resBody ? ` ${w.resBody.slice(0, 300)}` : ''}`).join('\n') ||
      '(none)',
  );
  console.error(`--- attempted external requests ---\n${blocked.join('\n') || '(none)'}`);
  console.error(`--- all requests to the API ---\n${summarizeWire() || '(none)'}`);
}

function writeWireLog() {
  if (!WIRE_LOG) return;
  const out = wire.map(({ start, ...w }) => w);
  fs.writeFileSync(WIRE_LOG, JSON.stringify({ base: BASE, mode: MODE, blocked, console: consoleLines, requests: out }, null, 2));
}

// Hard bound on the whole run, whatever hangs.
const hardLimitS = MESSAGES.length * TIMEOUT_S + OBSERVE_S + (4 * GUARD_MS) / 1000;
const killer = setTimeout(() => {
  console.error(`FAIL widget.mjs: still running after ${hardLimitS}s`);
  dumpDiagnostics();
  process.exit(1);
}, hardLimitS * 1000);
killer.unref();

main().then(
  async () => {
    writeWireLog();
    await cleanup();
    console.log(`PASS widget.mjs (${secs()}s)`);
    process.exit(0);
  },
  async (e) => {
    console.error(`FAIL widget.mjs [${secs()}s]: ${e instanceof CheckFailed ? e.message : e && e.stack ? e.stack : e}`);
    if (page) {
      await page.screenshot({ path: SCREENSHOT }).then(() => console.error(`failure screenshot: ${SCREENSHOT}`)).catch(() => {});
    }
    dumpDiagnostics();
    writeWireLog();
    await cleanup();
    process.exit(1);
  },
);
