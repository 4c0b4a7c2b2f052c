/**
 * Headless check of a `.tally/` folder with Tally's OWN loaders (packages/core/src,
 * tally-evals/tally @ 6aa50a4), replaying exactly what the viewers do:
 *
 *   web viewer (`tally dev server`, packages/cli/src/viewer.ts + packages/viewer/src/pages/*)
 *     GET /api/conversations                      -> store.listConversations() + c.listRuns()
 *     GET /api/conversations/:id/trajectory       -> store.loadTrajectoryMeta(id) + store.loadTrajectoryStepTraces(id)
 *                                                     (fetched by BOTH the conversation page and the trajectory page)
 *     GET /api/conversations/:id/runs             -> conv.listRuns()   (file names only)
 *     GET /api/conversations/:id                  -> conv.load()       (only the run page fetches this)
 *     GET /api/conversations/:id/runs/:runId      -> tally: raw file text (parsed by the browser, NOT validated)
 *                                                     trajectory: JSON.parse on the server
 *     Any exception in a route -> Bun answers 500 "Something went wrong!" -> the page's r.json() throws
 *     -> the page renders "Error: <JSON parse message>".
 *
 *   TUI (`tally browse`, packages/cli/src/components/BrowseView.tsx)
 *     trajectory entry shown iff loadTrajectoryMeta() !== null (errors swallowed -> entry hidden)
 *     trajectory screen: loadTrajectoryMeta + loadTrajectoryStepTraces (zod) -> "Error: ..." on throw
 *     run screen: conv.load() + run.load(); tally runs go through decodeRunArtifact (zod)
 *     a runs/trajectory/*.json file opened there is rendered as a TallyRunArtifact -> SummaryView
 *     reads report.result.summaries -> TypeError when `result` is missing (crash).
 *
 * Usage:  bun validate-tally-folder.ts <path/to/.tally | project dir containing .tally> [--json]
 * Exit:   0 = everything loads in both viewers with no data loss; 1 = problems (listed); 2 = usage.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import {
  TallyStore,
  decodeRunArtifact,
} from './packages/core/src/index.ts';

type Level = 'error' | 'warning' | 'note';
interface Finding {
  level: Level;
  conversation?: string;
  file?: string;
  where: string; // which viewer path is affected
  message: string;
}

const args = process.argv.slice(2);
const asJson = args.includes('--json');
const target = args.find((a) => !a.startsWith('--'));
if (!target) {
  console.error('usage: bun validate-tally-folder.ts <path/to/.tally | project dir> [--json]');
  process.exit(2);
}

let tallyDir = resolve(target);
if (basename(tallyDir) !== '.tally' && existsSync(join(tallyDir, '.tally'))) {
  tallyDir = join(tallyDir, '.tally');
}
if (!existsSync(tallyDir) || !statSync(tallyDir).isDirectory()) {
  console.error(`not a directory: ${tallyDir}`);
  process.exit(2);
}

const findings: Finding[] = [];
const add = (f: Finding) => findings.push(f);
const msg = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Run fn while capturing console.warn (decodeConversation reports skipped lines that way). */
async function captureWarnings<T>(fn: () => Promise<T>): Promise<{ value?: T; error?: unknown; warnings: string[] }> {
  const warnings: string[] = [];
  const orig = console.warn;
  console.warn = (...a: unknown[]) => warnings.push(a.map(String).join(' '));
  try {
    return { value: await fn(), warnings };
  } catch (error) {
    return { error, warnings };
  } finally {
    console.warn = orig;
  }
}

const store = await TallyStore.open({
  cwd: dirname(tallyDir),
  config: { storage: { backend: 'local', path: tallyDir } },
});

const conversations = (await store.listConversations()).sort((a, b) => a.id.localeCompare(b.id));
if (!existsSync(join(tallyDir, 'conversations'))) {
  add({ level: 'error', where: 'all', message: `missing ${join(tallyDir, 'conversations')}/ (viewer shows "No conversations found")` });
}

const SAFE_ID = /^[A-Za-z0-9._-]+$/;
const summary: Record<string, unknown>[] = [];

for (const conv of conversations) {
  const id = conv.id;
  const dir = join(tallyDir, 'conversations', id);
  const row: Record<string, unknown> = { conversation: id };
  summary.push(row);

  if (!SAFE_ID.test(id)) {
    add({ level: 'warning', conversation: id, where: 'web viewer', message: 'folder name has characters outside [A-Za-z0-9._-]; the web viewer puts ids into URLs unencoded' });
  }

  // ---- runs (listing only reads file names) ----
  const runs = await conv.listRuns();
  row.runs = runs.map((r) => `${r.type}/${r.id}`);
  for (const r of runs) {
    if (!r.path.endsWith('.json')) {
      add({ level: 'error', conversation: id, file: r.path, where: 'web+TUI run list', message: 'non-.json file inside runs/ is listed as a run and fails to load' });
    }
    const ts = r.id.split('-')[1];
    if (!ts || Number.isNaN(Number.parseInt(ts, 10))) {
      add({ level: 'warning', conversation: id, file: r.path, where: 'web+TUI run list', message: `run id "${r.id}" is not run-<epochMs>-<suffix>; its timestamp shows as empty/invalid and sorting is wrong` });
    }
  }

  // ---- /api/conversations/:id/trajectory  (conversation page + trajectory page; TUI trajectory screen) ----
  let metaOk = false;
  let stepsInvalid = false;
  let steps: Awaited<ReturnType<typeof store.loadTrajectoryStepTraces>> = null;
  try {
    const meta = await store.loadTrajectoryMeta(id);
    metaOk = meta !== null;
    row.trajectoryMeta = meta ? 'ok' : 'absent';
  } catch (e) {
    row.trajectoryMeta = 'INVALID';
    add({ level: 'error', conversation: id, file: join(dir, 'trajectory.meta.json'), where: 'web conversation page + trajectory page (500 -> "Error: ..."); TUI hides the trajectory entry', message: msg(e) });
  }
  try {
    steps = await store.loadTrajectoryStepTraces(id);
    row.stepTraces = steps ? steps.length : 'absent';
  } catch (e) {
    row.stepTraces = 'INVALID';
    stepsInvalid = true;
    add({ level: 'error', conversation: id, file: join(dir, 'stepTraces.json'), where: 'web conversation page + trajectory page (500 -> "Error: ..."); TUI trajectory screen "Error: ..."', message: msg(e) });
  }
  if (metaOk && steps === null && !stepsInvalid) {
    add({ level: 'warning', conversation: id, where: 'TUI trajectory screen', message: 'trajectory.meta.json present but stepTraces.json absent: "No trajectory data found for this conversation"' });
  }
  if (steps && steps.length === 0) {
    add({ level: 'note', conversation: id, where: 'web trajectory page / TUI', message: 'stepTraces.json is [] (zero turns): "No step traces available." / "No trajectory data available"' });
  }
  if (steps && steps.length > 0) {
    const ends = steps.map((s, i) => (s.end ? i : -1)).filter((i) => i >= 0);
    if (ends.length === 0) add({ level: 'warning', conversation: id, file: join(dir, 'stepTraces.json'), where: 'semantics', message: 'no trace carries an `end` marker (Tally always sets it on the last trace)' });
    if (ends.some((i) => i !== steps!.length - 1)) add({ level: 'warning', conversation: id, file: join(dir, 'stepTraces.json'), where: 'semantics', message: '`end` marker on a trace other than the last' });
  }

  // ---- /api/conversations/:id  (run page; TUI run view/compare; example harness playback) ----
  const convFile = join(dir, 'conversation.jsonl');
  const loaded = await captureWarnings(() => conv.load());
  const conversationNeeded = runs.length > 0;
  if (loaded.error) {
    row.conversation_jsonl = 'FAILS';
    add({
      level: conversationNeeded ? 'error' : 'warning',
      conversation: id,
      file: convFile,
      where: conversationNeeded
        ? 'web run page (500 -> "Error: ..."); TUI run view "✗ Error loading data"'
        : 'not loaded by any page while the conversation has no runs; breaks as soon as a run is added and breaks playback',
      message: msg(loaded.error),
    });
  } else if (loaded.value) {
    const c = loaded.value;
    row.conversation_jsonl = `${c.steps.length} steps`;
    // Re-read raw lines to tell header-only lines from broken step lines.
    const lines = readFileSync(convFile, 'utf-8').split('\n').filter((l) => l.trim().length > 0);
    for (const w of loaded.warnings) {
      const m = /^Line (\d+):/.exec(w);
      const raw = m ? lines[Number(m[1]) - 1] : undefined;
      let headerOnly = false;
      if (raw) {
        try {
          const o = JSON.parse(raw);
          headerOnly = !('stepIndex' in o) && !('input' in o) && !('output' in o);
        } catch {}
      }
      add({
        level: headerOnly ? 'note' : 'error',
        conversation: id,
        file: convFile,
        where: headerOnly ? 'header-only line (carries conversationId/conversationMetadata, yields no step)' : 'step silently DROPPED by decodeConversation (viewers show fewer turns)',
        message: w,
      });
    }
    // Things Tally's zod check lets through but the pages render badly or drop silently.
    lines.forEach((raw, i) => {
      let o: any;
      try { o = JSON.parse(raw); } catch { return; }
      if (!o || typeof o !== 'object' || !('stepIndex' in o)) return;
      if (o.timestamp !== undefined && typeof o.timestamp !== 'string') {
        add({ level: 'warning', conversation: id, file: convFile, where: 'decodeConversation', message: `line ${i + 1}: non-string timestamp is silently dropped (write an ISO-8601 string)` });
      }
      const isMsg = (m: any) => m && typeof m === 'object' && !Array.isArray(m) && typeof m.role === 'string' && 'content' in m;
      if (!isMsg(o.input)) add({ level: 'warning', conversation: id, file: convFile, where: 'web run page', message: `line ${i + 1}: input is not a {role, content} message (zod accepts any object; the page renders role=undefined)` });
      if (Array.isArray(o.output) && !o.output.every(isMsg)) add({ level: 'warning', conversation: id, file: convFile, where: 'web run page', message: `line ${i + 1}: an output entry is not a {role, content} message` });
    });
    if (c.id === 'unknown') {
      add({ level: 'warning', conversation: id, file: convFile, where: 'semantics', message: 'first line has no string conversationId; Conversation.id becomes "unknown"' });
    } else if (c.id !== id) {
      add({ level: 'warning', conversation: id, file: convFile, where: 'semantics', message: `conversationId "${c.id}" differs from folder name "${id}"` });
    }
    if (steps && steps.length !== c.steps.length) {
      add({ level: 'warning', conversation: id, where: 'semantics', message: `stepTraces.json has ${steps.length} traces but conversation.jsonl has ${c.steps.length} steps` });
    }
    c.steps.forEach((s, i) => {
      if (s.stepIndex !== i) add({ level: 'warning', conversation: id, file: convFile, where: 'web run page', message: `step ${i} has stepIndex ${s.stepIndex}; per-step evals are looked up by stepIndex` });
    });
  }

  // ---- each run file ----
  for (const r of runs) {
    let text: string;
    try {
      text = readFileSync(r.path, 'utf-8');
    } catch (e) {
      add({ level: 'error', conversation: id, file: r.path, where: 'web run page / TUI', message: msg(e) });
      continue;
    }
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      add({ level: 'error', conversation: id, file: r.path, where: r.type === 'tally' ? 'web run page (browser r.json() fails) + TUI' : 'web run page (500) + TUI', message: msg(e) });
      continue;
    }
    if (r.type === 'tally') {
      try {
        decodeRunArtifact(text); // what `tally browse` does via RunRef.load()
      } catch (e) {
        add({ level: 'error', conversation: id, file: r.path, where: 'TUI run view "✗ Error loading data" (web run page does not validate)', message: msg(e) });
      }
    } else {
      if (!parsed || typeof parsed !== 'object' || typeof parsed.result !== 'object' || parsed.result === null) {
        add({ level: 'error', conversation: id, file: r.path, where: 'TUI run view', message: 'runs/trajectory file has no `result` object: `tally browse` renders it as a TallyRunArtifact and crashes (TypeError on result.summaries). The web run page shows it with empty eval tables. Tally itself never writes runs/trajectory/.' });
      }
    }
  }
}

const errors = findings.filter((f) => f.level === 'error').length;
const warnings = findings.filter((f) => f.level === 'warning').length;

if (asJson) {
  console.log(JSON.stringify({ tallyDir, conversations: summary, findings, errors, warnings }, null, 2));
} else {
  console.log(`Tally folder: ${tallyDir}`);
  console.log(`${conversations.length} conversation folder(s)`);
  for (const s of summary) console.log('  ' + JSON.stringify(s));
  for (const f of findings) {
    console.log(`${f.level.toUpperCase()}: [${f.conversation ?? '-'}] ${f.file ? f.file + ': ' : ''}${f.message}\n    affects: ${f.where}`);
  }
  console.log(`${errors} error(s), ${warnings} warning(s)`);
}
process.exit(errors > 0 ? 1 : 0);
