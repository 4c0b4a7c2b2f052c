// The web page that `guidepost serve` ships, driven in Debian's headless Chromium:
// chat with an agent whose replies stream, open the inspector and find the matched
// guideline, the tool call and a journey's current state, open the agent's definition,
// open a simulation run and its coverage, and check that the page asked nothing of any
// host but the server. Screenshots go to $SCREENSHOTS (default ./web-screenshots).
//
//   GUIDEPOST_URL=http://127.0.0.1:8800 SIMULATION=taxi-happy-path-trial0 node web.mjs
//
// The server must serve the example agents (banking and taxi) with a model that answers
// (the fake OpenAI-compatible server does), and --simulations pointing at a folder that
// holds the run named by SIMULATION.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const BASE = (process.env.GUIDEPOST_URL || '').replace(/\/$/, '');
const SIMULATION = process.env.SIMULATION || 'taxi-happy-path-trial0';
const SHOTS = process.env.SCREENSHOTS || './web-screenshots';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// How long a step may wait for the page: a hang guard, not a measure (a busy machine can take
// tens of seconds for what takes one on a quiet one).
const TIMEOUT = 300_000;

let step = 0;
const say = (m) => console.log(`ok ${++step} ${m}`);
class CheckFailed extends Error {}
const check = (cond, m) => { if (!cond) throw new CheckFailed(m); };

async function api(pathname, body, method) {
  const resp = await fetch(`${BASE}${pathname}`, {
    method: method || (body ? 'POST' : 'GET'),
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  check(resp.ok, `${pathname} answered ${resp.status}`);
  return resp.json();
}

async function main() {
  check(BASE, 'set GUIDEPOST_URL');
  fs.mkdirSync(SHOTS, { recursive: true });
  // Banking replies are streamed, so the page shows the reply growing.
  await api('/agents/banking', { message_output_mode: 'stream' }, 'PATCH');

  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'guidepost-web-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE ${new URL(BASE).hostname}`],
    viewport: { width: 1400, height: 900 },
  });
  const page = context.pages()[0] || (await context.newPage());
  const requested = [];
  const consoleErrors = [];
  page.on('request', (r) => requested.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  try {
    // Chat with the banking agent: a streamed reply that used a tool.
    await page.goto(`${BASE}/#/chat/banking`, { waitUntil: 'domcontentloaded' });
    await page.getByRole('button', { name: 'New conversation' }).click();
    await page.waitForURL(/#\/chat\/banking\/.+/, { timeout: TIMEOUT });
    say('opened the page and started a conversation with the banking agent');
    const input = page.getByRole('textbox', { name: 'Message' });
    await input.fill('What is the balance of account 12345?');
    await input.press('Enter');
    const reply = page.locator('.msg.agent').last();
    await reply.waitFor({ timeout: TIMEOUT });
    await page.waitForFunction(() => {
      const m = [...document.querySelectorAll('.msg.agent')].pop();
      return m && !m.classList.contains('streaming') && m.querySelector('.text').textContent.length > 10;
    }, null, { timeout: TIMEOUT });
    const text = await reply.locator('.text').textContent();
    const sessionId = decodeURIComponent(page.url().split('/').pop());
    const events = await api(`/sessions/${sessionId}/events?kinds=message&source=ai_agent&wait_for_data=0`);
    check(events.some((e) => Array.isArray(e.data.chunks) && e.data.chunks.at(-1) === null && e.data.message === text), 'the reply shown is the streamed message, complete');
    say(`the streamed reply arrived: "${text.slice(0, 60)}…"`);
    await page.screenshot({ path: path.join(SHOTS, 'chat.png') });

    await reply.getByRole('button', { name: 'Why?' }).click();
    const inspector = page.getByRole('complementary', { name: 'Inspector' });
    await inspector.locator('[data-guideline="banking.balance"]').waitFor({ timeout: TIMEOUT });
    check(await inspector.locator('[data-guideline="banking.balance"] .badge.ok').count() === 1, 'the balance guideline is shown as followed');
    await inspector.locator('[data-tool="fixtures:get_balance"]').waitFor({ timeout: TIMEOUT });
    check((await inspector.locator('[data-tool="fixtures:get_balance"]').textContent()).includes('15000'), 'the tool call shows its result');
    say('the inspector shows the matched guideline and the get_balance call with its result');
    await page.screenshot({ path: path.join(SHOTS, 'inspector.png') });

    // Taxi: a journey, drawn with its current state.
    await page.goto(`${BASE}/#/chat/taxi`, { waitUntil: 'domcontentloaded' });
    await page.getByRole('button', { name: 'New conversation' }).click();
    await page.waitForURL(/#\/chat\/taxi\/.+/, { timeout: TIMEOUT });
    await page.getByRole('textbox', { name: 'Message' }).fill('I need a taxi please');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
    const taxiReply = page.locator('.msg.agent').last();
    await taxiReply.waitFor({ timeout: TIMEOUT });
    await taxiReply.getByRole('button', { name: 'Why?' }).click();
    const journey = page.locator('[data-journey="taxi.book_taxi"]');
    await journey.locator('svg .node.current').waitFor({ timeout: TIMEOUT });
    const current = await journey.locator('svg .node.current').getAttribute('data-state');
    check(current === 'pickup', `the journey's current state is highlighted (got ${current})`);
    say(`the inspector draws the taxi journey with its current state "${current}" highlighted`);
    await journey.evaluate((el) => el.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: path.join(SHOTS, 'journey.png') });

    // The definition, from the inspector's link.
    await page.locator('[data-guideline] a').first().click();
    await page.waitForURL(/#\/agents\/taxi\?focus=/, { timeout: TIMEOUT });
    await page.locator('.yaml div.focus').waitFor({ timeout: TIMEOUT });
    say('a guideline link opens the agent definition at its line');

    // A simulation run and its coverage.
    await page.goto(`${BASE}/#/simulations`, { waitUntil: 'domcontentloaded' });
    await page.locator(`[data-run="${SIMULATION}"]`).waitFor({ timeout: TIMEOUT });
    await page.locator(`[data-run="${SIMULATION}"] a`).click();
    const coverage = page.locator('[data-coverage]').first();
    await coverage.locator('svg .node.covered').first().waitFor({ timeout: TIMEOUT });
    const covered = await coverage.locator('svg .node.covered').count();
    check(covered >= 3, `the coverage diagram marks visited states (${covered})`);
    say(`the simulation run shows its conversation and coverage (${covered} states visited)`);
    await page.screenshot({ path: path.join(SHOTS, 'simulation.png'), fullPage: true });

    // Phone-sized: still readable.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${BASE}/#/chat/banking/${sessionId}`, { waitUntil: 'domcontentloaded' });
    await page.locator('.msg.agent').first().waitFor({ timeout: TIMEOUT });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `the chat fits a phone's width (overflow ${overflow}px)`);
    await page.screenshot({ path: path.join(SHOTS, 'phone.png') });
    say('the chat fits a phone screen');

    const origin = new URL(BASE).origin;
    const foreign = requested.filter((u) => !u.startsWith(origin) && !u.startsWith('data:'));
    check(foreign.length === 0, `the page asked other hosts: ${foreign.join(', ')}`);
    check(consoleErrors.length === 0, `console errors: ${consoleErrors.join(' | ')}`);
    say(`${requested.length} requests, all to ${origin}`);
    console.log(`PASS web.mjs (${step} steps)`);
  } catch (e) {
    try { await page.screenshot({ path: path.join(SHOTS, 'failure.png'), fullPage: true }); } catch {}
    console.log(`FAIL ${e.message}`);
    console.log('requests:', requested.join('\n  '));
    console.log('console:', consoleErrors.join('\n  '));
    process.exitCode = 1;
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((e) => { console.log(`FAIL ${e.stack || e}`); process.exit(1); });
