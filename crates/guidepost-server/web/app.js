// Guidepost's web page. It uses the server's public REST API (with the API key typed in the
// header, if the server asks for one) and long polling, as any client does.

import { renderJourney, fromDefinition } from "./diagram.js";

const view = document.getElementById("view");
const keyInput = document.getElementById("api-key");
const toastBox = document.getElementById("toast");
let apiKey = localStorage.getItem("guidepost.key") || "";
keyInput.value = apiKey;

// ---------------------------------------------------------------------------------------------
// Plumbing

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function toast(text) {
  toastBox.textContent = text;
  toastBox.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => toastBox.classList.remove("show"), 4000);
}

class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const resp = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
  });
  const text = await resp.text();
  let data = text;
  try { data = text ? JSON.parse(text) : null; } catch { /* text */ }
  if (!resp.ok) {
    const detail = data && data.detail !== undefined ? data.detail : text;
    throw new ApiError(resp.status, detail);
  }
  return data;
}

function explain(error) {
  if (error.status === 401) return "The server needs an API key: type it in the header.";
  if (error.status === 403) return "This API key may not do that (an admin key can).";
  return error.message || String(error);
}

function short(id) {
  return String(id || "").slice(0, 8);
}

function fmt(n, digits = 0) {
  return typeof n === "number" ? n.toLocaleString(undefined, { maximumFractionDigits: digits }) : "–";
}

function json(value) {
  return h("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

// Streams of server-sent events, read with fetch (so the API key header goes along).
async function* sse(path, signal) {
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const resp = await fetch(path, { headers, signal });
  if (!resp.ok || !resp.body) throw new ApiError(resp.status, await resp.text());
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Routing: #/chat[/agent[/session]], #/agents[/agent][?focus=id], #/simulations[/run]

let cleanup = [];
function onLeave(fn) { cleanup.push(fn); }

async function route() {
  for (const fn of cleanup) { try { fn(); } catch { /* gone */ } }
  cleanup = [];
  const [path, query] = (location.hash.slice(1) || "/chat").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  view.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    if (parts[0] === "agents") await (parts[1] ? agentView(parts[1], params) : agentsView());
    else if (parts[0] === "simulations") await (parts[1] ? simulationView(parts[1]) : simulationsView());
    else await chatView(parts[1], parts[2]);
  } catch (error) {
    view.replaceChildren(h("div", { class: "panel" }, h("h1", {}, "Something went wrong"), h("p", {}, explain(error))));
  }
}

window.addEventListener("hashchange", route);
document.getElementById("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  apiKey = keyInput.value.trim();
  if (apiKey) localStorage.setItem("guidepost.key", apiKey);
  else localStorage.removeItem("guidepost.key");
  toast(apiKey ? "API key saved in this browser" : "No API key");
  route();
});

// ---------------------------------------------------------------------------------------------
// Definitions, cached per agent

const definitions = new Map();
async function definition(agentId) {
  if (!definitions.has(agentId)) {
    definitions.set(agentId, Promise.all([
      api(`/agents/${encodeURIComponent(agentId)}/definition?format=json`),
      fetch(`/agents/${encodeURIComponent(agentId)}/definition`, { headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} }).then((r) => r.text()),
    ]).then(([file, yaml]) => ({ file, yaml })));
  }
  try {
    return await definitions.get(agentId);
  } catch (error) {
    definitions.delete(agentId);
    throw error;
  }
}

function localId(agentId, id) {
  return String(id || "").startsWith(`${agentId}.`) ? String(id).slice(agentId.length + 1) : String(id || "");
}

// A link to the line of the agent's definition that declares `id` (or, for entities the
// definition writes without an id, such as a journey's conditions, the line with `condition`).
function definitionLink(agentId, id, condition) {
  const q = new URLSearchParams({ focus: localId(agentId, id) });
  if (condition) q.set("text", condition);
  return h("a", { href: `#/agents/${encodeURIComponent(agentId)}?${q}`, title: "Show where the definition says this" }, localId(agentId, id));
}

// ---------------------------------------------------------------------------------------------
// Chat

async function chatView(agentId, sessionId) {
  const agents = await api("/agents");
  if (!agents.length) {
    view.replaceChildren(h("div", { class: "panel" }, h("h1", {}, "No agents yet"), h("p", {}, "Start the server with definition files (guidepost serve agents/) or create one over the API.")));
    return;
  }
  if (!agentId || !agents.some((a) => a.id === agentId)) {
    location.hash = `#/chat/${encodeURIComponent(agents[0].id)}`;
    return;
  }
  const agent = agents.find((a) => a.id === agentId);
  const picker = h("select", { "aria-label": "Agent", onchange: (e) => { location.hash = `#/chat/${encodeURIComponent(e.target.value)}`; } },
    agents.map((a) => h("option", { value: a.id, selected: a.id === agentId }, `${a.name} (${a.id})`)));
  const sessionsList = h("ul", { class: "sessions", "aria-label": "Conversations" });
  const newButton = h("button", { class: "primary", onclick: async () => {
    try {
      const s = await api("/sessions", { method: "POST", body: { agent_id: agentId, title: `Chat ${new Date().toLocaleString()}` } });
      location.hash = `#/chat/${encodeURIComponent(agentId)}/${encodeURIComponent(s.id)}`;
    } catch (error) { toast(explain(error)); }
  } }, "New conversation");
  const sidebar = h("aside", { class: "sidebar" }, picker, newButton, h("a", { href: `#/agents/${encodeURIComponent(agentId)}` }, "Agent definition"), sessionsList);
  const messages = h("div", { class: "messages", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const status = h("div", { class: "status", "aria-live": "polite" });
  // Enabled once Enter and Send are wired (below): a message typed before would be lost.
  const input = h("textarea", { rows: 1, placeholder: sessionId ? "Write as the customer… (Enter sends, Shift+Enter for a new line)" : "Start a new conversation first", "aria-label": "Message", disabled: true });
  const send = h("button", { class: "primary", disabled: true, type: "submit" }, "Send");
  const composer = h("form", { class: "composer" }, input, send);
  const conversation = h("section", { class: "conversation" }, messages, status, composer);
  const inspector = h("aside", { class: "inspector", "aria-label": "Inspector", hidden: true });
  const layout = h("div", { class: "chat no-inspector" }, sidebar, conversation, inspector);
  view.replaceChildren(layout);

  try {
    const page = await api(`/sessions?agent_id=${encodeURIComponent(agentId)}&limit=30&sort=desc`);
    for (const s of page.items) {
      sessionsList.appendChild(h("li", {}, h("a", { href: `#/chat/${encodeURIComponent(agentId)}/${encodeURIComponent(s.id)}`, class: s.id === sessionId ? "active" : "" },
        s.title || `Conversation ${short(s.id)}`, h("br"), h("span", { class: "muted" }, new Date(s.creation_utc).toLocaleString()))));
    }
  } catch (error) {
    sessionsList.appendChild(h("li", { class: "muted" }, explain(error)));
  }
  if (!sessionId) {
    messages.appendChild(h("p", { class: "muted" }, `Talk to ${agent.name}: start a new conversation, or open one on the left.`));
    return;
  }

  const bubbles = new Map();
  const controller = new AbortController();
  onLeave(() => controller.abort());

  function bubble(event) {
    const d = event.data || {};
    const who = event.source === "customer" ? "customer" : event.source === "ai_agent" || event.source === "human_agent_on_behalf_of_ai_agent" ? "agent" : "human";
    let node = bubbles.get(event.id);
    if (!node) {
      const text = h("div", { class: "text" });
      const head = h("div", { class: "who" }, d.participant?.display_name || event.source);
      node = h("div", { class: `msg ${who}`, "data-event": event.id, "data-trace": event.trace_id }, head, text);
      if (who === "agent" && event.source === "ai_agent") {
        head.appendChild(h("button", { class: "why", title: "Why did the agent say this?", onclick: () => inspect(event.trace_id, node) }, "Why?"));
      }
      bubbles.set(event.id, node);
      messages.appendChild(node);
    }
    node.querySelector(".text").textContent = d.message || "";
    const chunks = Array.isArray(d.chunks) ? d.chunks : null;
    const streaming = chunks && chunks[chunks.length - 1] !== null;
    node.classList.toggle("streaming", Boolean(streaming));
    if (streaming && !node.dataset.following) {
      node.dataset.following = "1";
      follow(event.id).catch(() => {});
    }
    messages.scrollTop = messages.scrollHeight;
  }

  // A streamed message grows its chunks: follow it until the last chunk is null.
  async function follow(eventId) {
    for await (const e of sse(`/sessions/${encodeURIComponent(sessionId)}/events/${encodeURIComponent(eventId)}?sse=true&wait_for_data=60`, controller.signal)) {
      bubble(e);
    }
  }

  // How far the model is with the call under way, from a status that says so (a pulse).
  function modelWork(event) {
    const progress = event.data?.data?.progress;
    const work = progress?.model;
    if (!progress) return [];
    const seconds = ` (${Math.round((progress.elapsed_ms || 0) / 1000)} s)`;
    if (work?.step === "reading") return [" ", h("span", { class: "muted" }, `reading the prompt: ${work.done} of ${work.total} tokens${seconds}`)];
    if (work?.step === "writing") return [" ", h("span", { class: "muted" }, `writing: ${work.done} tokens${seconds}`)];
    if (work?.step === "waiting") return [" ", h("span", { class: "muted" }, `waiting for the model${seconds}`)];
    return [" ", h("span", { class: "muted" }, seconds.trim())];
  }

  function showStatus(event) {
    const s = event.data?.status;
    const stage = event.data?.data?.stage;
    if (s === "ready" && stage === "completed") status.replaceChildren();
    else if (s === "processing") status.replaceChildren(h("span", { class: "dots" }, stage || "Thinking"), ...modelWork(event));
    else if (s === "typing") status.replaceChildren(h("span", { class: "dots" }, "Typing"), ...modelWork(event));
    else if (s === "acknowledged") status.replaceChildren(h("span", { class: "dots" }, "Received"), ...modelWork(event));
    else if (s === "error") status.replaceChildren(h("span", { class: "badge bad" }, "error"), " ", event.data?.data?.exception || "");
    else if (s === "cancelled") status.replaceChildren(h("span", { class: "muted" }, "replaced by the newer message"));
  }

  let next = 0;
  async function poll() {
    while (!controller.signal.aborted) {
      try {
        const events = await api(`/sessions/${encodeURIComponent(sessionId)}/events?min_offset=${next}&wait_for_data=30`, { signal: controller.signal });
        for (const event of events) {
          next = Math.max(next, event.offset + 1);
          if (event.kind === "message") bubble(event);
          else if (event.kind === "status") showStatus(event);
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        if (error.status === 504) continue;
        status.replaceChildren(h("span", { class: "badge bad" }, "disconnected"), " ", explain(error));
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
  }
  poll();

  async function submit(e) {
    e?.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    try {
      await api(`/sessions/${encodeURIComponent(sessionId)}/events`, { method: "POST", body: { kind: "message", source: "customer", message: text } });
    } catch (error) {
      input.value = text;
      toast(explain(error));
    }
  }
  composer.addEventListener("submit", submit);
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) submit(e); });
  input.disabled = false;
  send.disabled = false;
  input.focus();

  async function inspect(traceId, node) {
    for (const b of messages.querySelectorAll(".msg.selected")) b.classList.remove("selected");
    node.classList.add("selected");
    layout.classList.remove("no-inspector");
    inspector.hidden = false;
    inspector.replaceChildren(h("p", { class: "muted" }, "Loading the turn…"));
    try {
      const turn = await api(`/sessions/${encodeURIComponent(sessionId)}/turns/${encodeURIComponent(traceId)}`);
      await renderInspector(inspector, turn, agentId, () => { inspector.hidden = true; layout.classList.add("no-inspector"); node.classList.remove("selected"); });
    } catch (error) {
      inspector.replaceChildren(h("p", {}, explain(error)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Inspector: why one turn came out as it did

async function renderInspector(root, turn, agentId, close) {
  const trace = turn.trace || {};
  const usage = trace.usage || {};
  const iterations = trace.iterations || [];
  let def = null;
  try { def = await definition(agentId); } catch { /* the page still shows the trace */ }
  const guidelines = new Map((def?.file?.guidelines || []).map((g) => [g.id, g]));
  for (const j of def?.file?.journeys || []) for (const g of j.guidelines || []) guidelines.set(g.id, g);

  const parts = [
    h("button", { class: "close", onclick: close, "aria-label": "Close the inspector" }, "×"),
    h("h2", {}, "Why this reply"),
    h("div", { class: "muted" }, `turn ${short(turn.trace_id)} · `, h("span", { class: `badge ${turn.status === "completed" ? "ok" : turn.status === "failed" ? "bad" : "dim"}` }, turn.status), turn.attempts > 1 ? ` · run ${turn.attempts} times` : ""),
    h("div", { class: "kv" },
      h("div", {}, h("b", {}, fmt(usage.calls)), h("span", {}, "model calls")),
      h("div", {}, h("b", {}, fmt(usage.prompt_tokens)), h("span", {}, "prompt tokens")),
      h("div", {}, h("b", {}, fmt(usage.completion_tokens)), h("span", {}, "completion tokens")),
      h("div", {}, h("b", {}, `${fmt((trace.duration_ms || 0) / 1000, 2)} s`), h("span", {}, "turn time")),
      h("div", {}, h("b", {}, `$${fmt(usage.cost_usd || 0, 5)}`), h("span", {}, "cost"))),
  ];
  if (trace.error) parts.push(h("p", {}, h("span", { class: "badge bad" }, "error"), " ", trace.error));

  // Guidelines: what the last pass decided about each candidate.
  const verdicts = new Map();
  for (const it of iterations) for (const c of it.matching?.candidates || []) verdicts.set(c.guideline_id, c);
  const matched = new Set(trace.matched || []);
  const rows = [...verdicts.values()].filter((c) => !String(c.guideline_id).startsWith("journey_node:"));
  // Guidelines the definition writes without an id (a journey's conditions) or that were
  // created over the API: read them from the store.
  await Promise.all(rows.filter((c) => !guidelines.has(localId(agentId, c.guideline_id))).map(async (c) => {
    try {
      const read = await api(`/guidelines/${encodeURIComponent(c.guideline_id)}`);
      guidelines.set(localId(agentId, c.guideline_id), read.guideline);
    } catch { /* shown without its text */ }
  }));
  rows.sort((a, b) => Number(matched.has(b.guideline_id)) - Number(matched.has(a.guideline_id)));
  parts.push(h("h3", {}, `Guidelines (${rows.filter((c) => matched.has(c.guideline_id)).length} followed of ${rows.length} considered)`));
  const list = h("div", { class: "panel" });
  for (const c of rows) {
    const g = guidelines.get(localId(agentId, c.guideline_id));
    const followed = matched.has(c.guideline_id);
    const starts = (g?.tags || []).find((t) => String(t).startsWith("journey:"));
    const badge = followed ? h("span", { class: "badge ok" }, "followed")
      : c.verdict === "matched" && starts ? h("span", { class: "badge ok" }, `starts ${localId(agentId, starts.slice(8))}`)
      : c.verdict === "matched" ? h("span", { class: "badge warn" }, g && !g.action ? "holds" : "matched, dropped")
      : h("span", { class: "badge dim" }, c.verdict.replace(/_/g, " "));
    list.appendChild(h("div", { class: "item", "data-guideline": c.guideline_id },
      h("div", { class: "head" }, badge, definitionLink(agentId, c.guideline_id, g?.condition), c.category ? h("span", { class: "muted" }, c.category.replace(/_/g, " ")) : null),
      g ? h("div", {}, h("span", { class: "muted" }, "when "), g.condition, g.action ? [h("span", { class: "muted" }, " → "), g.action] : null) : null,
      c.rationale ? h("div", { class: "rationale" }, c.rationale) : null));
  }
  if (!rows.length) list.appendChild(h("p", { class: "muted" }, "No guideline was considered."));
  parts.push(list);

  const resolutions = iterations.flatMap((it) => it.matching?.resolutions || []);
  if (resolutions.length) {
    parts.push(h("h3", {}, "Relationships that changed the outcome"));
    parts.push(h("div", { class: "panel" }, resolutions.map((r) => h("div", { class: "item" },
      h("div", { class: "head" }, h("span", { class: `badge ${r.effect === "added" ? "ok" : "warn"}` }, r.effect || ""), h("span", { class: "mono" }, JSON.stringify(r.entity))),
      h("div", { class: "rationale" }, typeof r.reason === "string" ? r.reason : JSON.stringify(r.reason))))));
  }

  // Journeys: where the customer stands, and the way there.
  const records = new Map();
  for (const it of iterations) for (const j of it.matching?.journeys || []) records.set(j.journey_id, j);
  const paths = turn.state?.journey_paths || {};
  const journeyIds = new Set([...records.keys(), ...Object.keys(paths)]);
  if (journeyIds.size) parts.push(h("h3", {}, "Journeys"));
  for (const jid of journeyIds) {
    const record = records.get(jid);
    const path = paths[jid] || record?.path_after || [];
    const before = record?.path_before || [];
    const abandoned = before.filter((s) => !path.includes(s));
    const box = h("div", { class: "panel", "data-journey": jid });
    box.appendChild(h("div", { class: "head" }, h("b", {}, localId(agentId, jid)), " ",
      record ? h("span", { class: "badge" }, JSON.stringify(record.decision).replace(/[{}"]/g, "").replace(/:/g, " ")) : null,
      " ", h("span", { class: "muted" }, `at ${path.length ? path[path.length - 1] : "the start"}`)));
    if (record?.rationale) box.appendChild(h("div", { class: "rationale" }, record.rationale));
    if (abandoned.length) box.appendChild(h("div", { class: "rationale" }, `went back from ${abandoned.join(" → ")}`));
    try {
      const [states, transitions] = await Promise.all([api(`/journeys/${encodeURIComponent(jid)}/states`), api(`/journeys/${encodeURIComponent(jid)}/transitions`)]);
      const svg = renderJourney({
        title: jid,
        states: states.map((s) => ({ id: s.id, kind: s.kind, label: s.action || (s.tools?.length ? `call ${s.tools.map((t) => t.tool_name).join(", ")}` : s.journey ? `run ${s.journey}` : s.kind) })),
        transitions,
        current: path.length ? path[path.length - 1] : "initial",
        path,
        abandoned,
      });
      box.appendChild(h("div", { class: "diagram" }, svg));
    } catch (error) {
      box.appendChild(h("p", { class: "muted" }, `path: ${path.join(" → ")}`));
    }
    parts.push(box);
  }

  const calls = iterations.flatMap((it) => it.tool_calls || []);
  if (calls.length || (trace.tool_insights?.missing || []).length) parts.push(h("h3", {}, "Tools"));
  if (calls.length) {
    parts.push(h("div", { class: "panel" }, calls.map((c) => h("div", { class: "item", "data-tool": `${c.tool?.service}:${c.tool?.name}` },
      h("div", { class: "head" }, h("span", { class: `badge ${c.ok ? "ok" : "bad"}` }, c.ok ? "ok" : "failed"), h("b", { class: "mono" }, `${c.tool?.name}`), h("span", { class: "muted" }, `${c.tool?.service} · ${fmt(c.duration_ms)} ms`)),
      h("details", { open: true }, h("summary", {}, "arguments and result"), json(c.arguments || {}), json(c.result?.data ?? c.result))))));
  }
  for (const m of trace.tool_insights?.missing || []) parts.push(h("p", { class: "muted" }, `${m.tool?.name} is missing ${m.display_name || m.parameter}${m.problem ? ` (${m.problem})` : ""}`));

  // Model calls: every call of the turn, by task.
  const modelRows = [];
  for (const it of iterations) {
    for (const b of it.matching?.batches || []) {
      modelRows.push(h("tr", {}, h("td", {}, b.category.replace(/_/g, " ")), h("td", {}, `${(b.items || []).length} item(s), wave ${b.wave}`),
        h("td", {}, fmt(b.usage?.prompt_tokens)), h("td", {}, fmt(b.usage?.completion_tokens)), h("td", {}, b.usage ? `${fmt(b.usage.latency_ms)} ms` : b.error ? h("span", { class: "badge bad" }, "failed") : "–")));
    }
    for (const t of it.tool_inference || []) {
      if (t.model_call) modelRows.push(h("tr", {}, h("td", {}, "tool inference"), h("td", {}, (t.tools || []).join(", ")), h("td", {}, fmt(t.prompt_tokens)), h("td", {}, "–"), h("td", {}, "–")));
    }
  }
  if (trace.composition?.model_calls) modelRows.push(h("tr", {}, h("td", {}, "composition"), h("td", {}, `${trace.composition.mode}${trace.composition.template_id ? ` (${trace.composition.template_id})` : ""}`), h("td", {}, fmt(trace.composition.prompt_tokens)), h("td", {}, "–"), h("td", {}, "–")));
  parts.push(h("h3", {}, "Model calls"));
  parts.push(h("div", { class: "panel" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "task"), h("th", {}, "what"), h("th", {}, "prompt"), h("th", {}, "completion"), h("th", {}, "latency"))), h("tbody", {}, modelRows)),
    h("p", { class: "muted" }, `total ${fmt(usage.calls)} calls, ${fmt(usage.prompt_tokens)} + ${fmt(usage.completion_tokens)} tokens, ${fmt(usage.latency_ms)} ms of model time, $${fmt(usage.cost_usd || 0, 5)}`)));
  root.replaceChildren(...parts);
}

// ---------------------------------------------------------------------------------------------
// Agents

async function agentsView() {
  const agents = await api("/agents");
  view.replaceChildren(h("h1", {}, "Agents"), h("div", { class: "cards" }, agents.map((a) => h("a", { class: "card", href: `#/agents/${encodeURIComponent(a.id)}` },
    h("h3", {}, a.name), h("div", { class: "muted mono" }, a.id), h("p", {}, a.description || ""), h("span", { class: "badge dim" }, a.composition_mode), " ", h("span", { class: "badge dim" }, a.message_output_mode)))));
}

async function agentView(agentId, params) {
  const [agent, def] = await Promise.all([api(`/agents/${encodeURIComponent(agentId)}`), definition(agentId)]);
  const file = def.file || {};
  const focus = params.get("focus");
  const parts = [h("h1", {}, agent.name, " ", h("span", { class: "muted mono" }, agent.id)), h("p", {}, agent.description || ""),
    h("div", { class: "tabs" }, ["guidelines", "relationships", "journeys", "tools", "glossary", "variables", "definition"].map((t) => h("a", { href: `#/agents/${encodeURIComponent(agentId)}?focus=section-${t}` }, t))),
    h("p", {}, h("a", { href: `#/chat/${encodeURIComponent(agentId)}` }, `Talk to ${agent.name} →`))];
  const section = (name, title, body) => h("section", { id: `section-${name}` }, h("h2", {}, title), body);
  const guidelineRows = [];
  const addGuideline = (g, journey) => guidelineRows.push(h("tr", { id: `g-${g.id}` }, h("td", { class: "mono" }, h("a", { href: `#/agents/${encodeURIComponent(agentId)}?focus=${encodeURIComponent(g.id)}` }, g.id)),
    h("td", {}, g.condition), h("td", {}, g.action || h("span", { class: "muted" }, "observation")), h("td", {}, journey ? h("span", { class: "badge dim" }, `in ${journey}`) : null, (g.tags || []).map((t) => h("span", { class: "badge dim" }, t)))));
  for (const g of file.guidelines || []) addGuideline(g);
  for (const j of file.journeys || []) for (const g of j.guidelines || []) addGuideline(g, j.id);
  parts.push(section("guidelines", `Guidelines (${guidelineRows.length})`, h("div", { class: "panel" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "id"), h("th", {}, "when"), h("th", {}, "then"), h("th", {}, ""))), h("tbody", {}, guidelineRows)))));
  parts.push(section("relationships", `Relationships (${(file.relationships || []).length})`, h("div", { class: "panel" }, (file.relationships || []).map((r) => h("div", { class: "item mono" }, `${r.source} —${r.kind}→ ${[].concat(r.target).join(", ")}`)), (file.relationships || []).length ? null : h("p", { class: "muted" }, "none"))));
  const journeys = h("div", {});
  for (const j of file.journeys || []) {
    const { states, transitions } = fromDefinition(j);
    journeys.appendChild(h("div", { class: "panel", id: `j-${j.id}` }, h("h3", {}, j.title, " ", h("span", { class: "muted mono" }, j.id)), h("div", { class: "muted" }, `starts when: ${(j.conditions || []).join(" · ")}`),
      h("div", { class: "diagram" }, renderJourney({ title: j.title, states, transitions }))));
  }
  parts.push(section("journeys", `Journeys (${(file.journeys || []).length})`, journeys));
  parts.push(section("tools", `Tools (${(file.tools || []).length})`, h("div", { class: "panel" }, (file.tools || []).map((t) => h("div", { class: "item" }, h("b", { class: "mono" }, t.name), " ", h("span", { class: "muted" }, t.description || ""), t.parameters ? json(t.parameters) : null)))));
  parts.push(section("glossary", `Glossary (${(file.glossary || []).length})`, h("div", { class: "panel" }, (file.glossary || []).map((t) => h("div", { class: "item" }, h("b", {}, t.name || t.term), " — ", t.description || "")))));
  parts.push(section("variables", `Context variables (${(file.variables || []).length})`, h("div", { class: "panel" }, (file.variables || []).map((v) => h("div", { class: "item" }, h("b", { class: "mono" }, v.name), " ", h("span", { class: "muted" }, v.description || ""), v.tool ? h("span", { class: "badge dim" }, `from ${v.tool}`) : null)))));
  const lines = String(def.yaml || "").split("\n");
  const yaml = h("div", { class: "yaml", role: "region", "aria-label": "Definition" }, lines.map((l, i) => h("div", { id: `line-${i + 1}` }, l || " ")));
  parts.push(section("definition", "Definition", yaml));
  view.replaceChildren(...parts);
  if (focus) {
    if (focus.startsWith("section-")) {
      document.getElementById(focus)?.scrollIntoView();
    } else {
      // The line of the definition where this id is declared, else the line with its text.
      const escaped = focus.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      let at = lines.findIndex((l) => new RegExp(`^\\s*-?\\s*id:\\s*['"]?${escaped}['"]?\\s*$`).test(l));
      const text = params.get("text");
      if (at < 0 && text) at = lines.findIndex((l) => l.includes(text));
      if (at >= 0) {
        const line = document.getElementById(`line-${at + 1}`);
        line.classList.add("focus");
        line.scrollIntoView({ block: "center" });
        document.getElementById(`g-${focus}`)?.classList.add("focus");
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Simulations

// Tool calls and results in a conversation file, said briefly.
function messageParts(content) {
  const parts = Array.isArray(content) ? content : [content];
  return parts.map((p) => {
    if (p?.type === "tool-call") return `calls ${p.toolName}(${JSON.stringify(p.input ?? {})})`;
    if (p?.type === "tool-result") return `${p.toolName} → ${JSON.stringify(p.output?.value?.data ?? p.output?.value ?? p.output)}`;
    return JSON.stringify(p);
  }).join("\n");
}

async function simulationsView() {
  const runs = await api("/simulations");
  const rows = runs.map((r) => h("tr", { "data-run": r.id },
    h("td", {}, h("a", { href: `#/simulations/${encodeURIComponent(r.id)}` }, r.id)), h("td", {}, r.scenario || "–"), h("td", {}, r.agent || "–"),
    h("td", {}, r.passed === true ? h("span", { class: "badge ok" }, "passed") : r.passed === false ? h("span", { class: "badge bad" }, "failed") : h("span", { class: "badge dim" }, "unknown")),
    h("td", {}, r.reason || "–"), h("td", {}, fmt(r.turns)), h("td", { class: "muted" }, r.created ? new Date(r.created).toLocaleString() : "")));
  view.replaceChildren(h("h1", {}, "Simulations"),
    runs.length ? h("div", { class: "panel" }, h("table", {}, h("thead", {}, h("tr", {}, ["run", "scenario", "agent", "result", "stopped because", "turns", "started"].map((t) => h("th", {}, t)))), h("tbody", {}, rows)))
      : h("div", { class: "panel" }, h("p", {}, "No runs. Run `guidepost simulate scenarios/` and start the server with `--simulations .tally` (the simulator's artifact folder).")));
}

async function simulationView(id) {
  const sim = await api(`/simulations/${encodeURIComponent(id)}`);
  const run = sim.run;
  const parts = [h("h1", {}, run.id), h("p", {},
    run.passed === true ? h("span", { class: "badge ok" }, "passed") : run.passed === false ? h("span", { class: "badge bad" }, "failed") : null, " ",
    `${run.scenario || ""} · ${run.agent || ""} · stopped because ${run.reason || "–"} · ${fmt(run.turns)} turns`)];
  if (run.report?.summary) parts.push(h("p", { class: "muted" }, run.report.summary));
  const checkpoints = run.report?.checkpoints || [];
  if (checkpoints.length) {
    parts.push(h("h2", {}, "Checkpoints"), h("div", { class: "panel" }, checkpoints.map((c) => h("div", { class: "item" }, h("span", { class: `badge ${c.passed ? "ok" : "bad"}` }, c.passed ? "passed" : "failed"), " ", c.name, (c.failures || []).length ? h("div", { class: "rationale" }, c.failures.join("; ")) : null))));
  }
  parts.push(h("h2", {}, "Conversation"));
  const convo = h("div", { class: "panel" });
  for (const step of sim.steps || []) {
    convo.appendChild(h("div", { class: "item" },
      h("div", { class: "head" }, h("span", { class: "badge dim" }, `turn ${step.turnIndex + 1}`), step.stepId ? h("span", { class: "badge" }, `step ${step.stepId}`) : null,
        h("span", { class: "muted" }, `${step.selection?.method || ""}${step.source ? ` · ${step.source}` : ""}${step.latencyMs !== undefined ? ` · ${step.latencyMs} ms` : ""}`)),
      h("div", {}, h("b", {}, "customer: "), step.userMessage?.content || ""),
      (step.agentMessages || []).map((m) => h("div", {}, h("b", {}, `${m.role === "assistant" || !m.role ? "agent" : m.role}: `),
        typeof m.content === "string" ? m.content : h("span", { class: "mono" }, messageParts(m.content ?? m)))),
      step.observations?.journey_states ? h("div", { class: "rationale" }, step.observations.journey_states.map((s) => `${s.journey} → ${s.state}`).join(", ")) : null));
  }
  parts.push(convo);
  parts.push(h("h2", {}, "Coverage of the suite"));
  if (!(sim.coverage || []).length) parts.push(h("p", { class: "muted" }, "The suite's report has no coverage."));
  for (const agentCoverage of sim.coverage || []) {
    for (const j of agentCoverage.journeys || []) {
      const visits = Object.fromEntries((j.states || []).map((s) => [s.state, s.visits]));
      const edgeVisits = Object.fromEntries((j.transitions || []).map((t) => [t.id, t.visits]));
      const stateIds = [...new Set((j.states || []).map((s) => s.state).filter((s) => s !== "end" && s !== "initial"))];
      for (const t of j.transitions || []) for (const s of [t.from, t.to]) if (s !== "initial" && s !== "end" && !stateIds.includes(s)) stateIds.push(s);
      const svg = renderJourney({ title: j.title || j.journey, states: stateIds.map((s) => ({ id: s, kind: "state", label: s })), transitions: j.transitions || [], visits, edgeVisits });
      parts.push(h("div", { class: "panel", "data-coverage": j.journey },
        h("h3", {}, `${agentCoverage.agent}: ${j.title || j.journey}`),
        h("div", { class: "muted" }, `entered in ${fmt(j.runs_entered)} run(s), completed in ${fmt(j.runs_completed)}; missed states: ${(j.missed_states || []).join(", ") || "none"}; missed transitions: ${(j.missed_transitions || []).join(", ") || "none"}`),
        h("div", { class: "legend" }, h("span", {}, "green: visited"), h("span", {}, "red: never visited"), h("span", {}, "×n: visits")),
        h("div", { class: "diagram" }, svg)));
    }
  }
  view.replaceChildren(...parts);
}

route();
