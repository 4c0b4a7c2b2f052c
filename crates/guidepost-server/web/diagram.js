// Journey diagrams as SVG, drawn in the page: no library, nothing from another host.
//
// renderJourney({states, transitions, current, path, abandoned, visits, edgeVisits})
//   states:      [{id, label, kind}]      the journey's states (without initial and end)
//   transitions: [{id, from, to, condition}]
//   current:     id of the state the session is at (highlighted)
//   path:        ids visited, in order (the edges between consecutive ones are drawn as taken)
//   abandoned:   ids left by a backtrack (dashed)
//   visits / edgeVisits: coverage counts by state id / transition id (covered or missed)

const SVG = "http://www.w3.org/2000/svg";
const W = 190, H = 54, GAP_X = 40, GAP_Y = 62, TERMINAL = 11;

function el(name, attrs = {}, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function wrap(text, max) {
  const words = String(text || "").split(/\s+/).filter(Boolean);
  const lines = [];
  let line = "";
  for (const word of words) {
    const next = line ? `${line} ${word}` : word;
    if (next.length > max && line) {
      lines.push(line);
      line = word;
    } else {
      line = next;
    }
  }
  if (line) lines.push(line);
  // Text without spaces (Chinese, say) is cut by length.
  const out = [];
  for (const l of lines) {
    for (let i = 0; i < l.length; i += max) out.push(l.slice(i, i + max));
  }
  if (out.length > 2) return [out[0], out[1].slice(0, max - 1) + "…"];
  return out;
}

function layers(ids, transitions) {
  const depth = new Map([["initial", 0]]);
  const queue = ["initial"];
  while (queue.length) {
    const from = queue.shift();
    for (const t of transitions.filter((t) => t.from === from)) {
      if (!depth.has(t.to)) {
        depth.set(t.to, depth.get(from) + 1);
        queue.push(t.to);
      }
    }
  }
  let deepest = Math.max(0, ...depth.values());
  for (const id of ids) {
    if (!depth.has(id)) depth.set(id, ++deepest);
  }
  // The end sits below everything.
  if (depth.has("end")) depth.set("end", Math.max(...[...depth.entries()].filter(([k]) => k !== "end").map(([, v]) => v)) + 1);
  return depth;
}

export function renderJourney(spec) {
  const states = spec.states || [];
  const transitions = (spec.transitions || []).filter((t) => t.from && t.to);
  const ids = ["initial", ...states.map((s) => s.id)];
  if (transitions.some((t) => t.to === "end")) ids.push("end");
  const depth = layers(ids, transitions);
  const rows = new Map();
  for (const id of ids) {
    const d = depth.get(id);
    if (!rows.has(d)) rows.set(d, []);
    rows.get(d).push(id);
  }
  const widest = Math.max(1, ...[...rows.values()].map((r) => r.length));
  const width = widest * W + (widest - 1) * GAP_X + 2 * 24 + 150;
  const pos = new Map();
  for (const [d, row] of rows) {
    const rowWidth = row.length * W + (row.length - 1) * GAP_X;
    row.forEach((id, i) => {
      const x = (width - 150 - rowWidth) / 2 + i * (W + GAP_X) + W / 2;
      const y = 24 + d * (H + GAP_Y) + H / 2;
      pos.set(id, { x, y });
    });
  }
  const height = 24 * 2 + (Math.max(...rows.keys()) + 1) * (H + GAP_Y) - GAP_Y;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  el("title", {}, svg).textContent = spec.title || "journey";
  const defs = el("defs", {}, svg);
  for (const [name, color] of [["arrow", "#8d98a8"], ["arrow-taken", "#1f4f8a"], ["arrow-covered", "#1d7a46"], ["arrow-missed", "#b3261e"]]) {
    const m = el("marker", { id: name, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", fill: color }, m);
  }
  const path = spec.path || [];
  const taken = new Set();
  for (let i = 1; i < path.length; i++) taken.add(`${path[i - 1]}>${path[i]}`);
  const half = (id) => (id === "initial" || id === "end" ? TERMINAL : H / 2);
  let backIndex = 0;
  for (const t of transitions) {
    const a = pos.get(t.from), b = pos.get(t.to);
    if (!a || !b) continue;
    const g = el("g", { class: "edge", "data-edge": t.id || "" }, svg);
    let cls = "", marker = "arrow";
    if (taken.has(`${t.from}>${t.to}`)) { cls = "taken"; marker = "arrow-taken"; }
    if (spec.edgeVisits && t.id in spec.edgeVisits) {
      if (spec.edgeVisits[t.id] > 0) { cls = "covered"; marker = "arrow-covered"; } else { cls = "missed"; marker = "arrow-missed"; }
    }
    if (cls) g.classList.add(cls);
    let d, lx, ly;
    const span = depth.get(t.to) - depth.get(t.from);
    if (b.y > a.y && span === 1) {
      const y1 = a.y + half(t.from), y2 = b.y - half(t.to) - 2;
      const my = (y1 + y2) / 2;
      d = `M${a.x},${y1} C${a.x},${my} ${b.x},${my} ${b.x},${y2}`;
      lx = (a.x + b.x) / 2; ly = my;
    } else {
      // Back, sideways and long edges go round on the right, clear of the states between.
      const off = W / 2 + 24 + 14 * (backIndex++ % 4);
      const x1 = a.x + (t.from === "initial" || t.from === "end" ? TERMINAL : W / 2), x2 = b.x + (t.to === "initial" || t.to === "end" ? TERMINAL : W / 2) + 2;
      const side = Math.max(a.x, b.x) + off;
      d = `M${x1},${a.y} C${side},${a.y} ${side},${b.y} ${x2},${b.y}`;
      lx = side - 8; ly = (a.y + b.y) / 2;
    }
    el("path", { d, "marker-end": `url(#${marker})` }, g);
    const label = t.condition ? wrap(t.condition, 30)[0] + (t.condition.length > 30 ? "…" : "") : "";
    const count = spec.edgeVisits && t.id in spec.edgeVisits ? ` ×${spec.edgeVisits[t.id]}` : "";
    if (label || count) {
      const text = `${label}${count}`.trim();
      const bg = el("rect", { x: lx - text.length * 2.9, y: ly - 8, width: text.length * 5.8, height: 14, rx: 3 }, g);
      bg.setAttribute("opacity", "0.9");
      const tx = el("text", { x: lx, y: ly + 3, "text-anchor": "middle" }, g);
      tx.textContent = text;
    }
    if (t.condition) el("title", {}, g).textContent = t.condition;
  }
  const abandoned = new Set(spec.abandoned || []);
  const visited = new Set(path);
  for (const id of ids) {
    const p = pos.get(id);
    if (id === "initial" || id === "end") {
      const c = el("circle", { cx: p.x, cy: p.y, r: TERMINAL, class: `terminal${spec.current === id ? " current" : ""}` }, svg);
      if (id === "end") el("circle", { cx: p.x, cy: p.y, r: TERMINAL - 4, fill: "#fbfcfd" }, svg);
      el("title", {}, c).textContent = id === "initial" ? "start" : "end";
      continue;
    }
    const s = states.find((x) => x.id === id) || { id, label: id };
    const g = el("g", { class: "node", "data-state": id }, svg);
    if (visited.has(id)) g.classList.add("visited");
    if (abandoned.has(id) && !visited.has(id)) g.classList.add("abandoned");
    if (spec.visits && id in spec.visits) g.classList.add(spec.visits[id] > 0 ? "covered" : "missed");
    if (spec.current === id) g.classList.add("current");
    el("rect", { x: p.x - W / 2, y: p.y - H / 2, width: W, height: H, rx: 9 }, g);
    const kind = el("text", { x: p.x - W / 2 + 9, y: p.y - H / 2 + 13, class: "kind" }, g);
    kind.textContent = `${s.kind || "state"} · ${id}${spec.visits && id in spec.visits ? ` · ×${spec.visits[id]}` : ""}`;
    const lines = wrap(s.label || id, 30);
    lines.forEach((line, i) => {
      const tx = el("text", { x: p.x - W / 2 + 9, y: p.y - H / 2 + 29 + i * 14 }, g);
      tx.textContent = line;
    });
    el("title", {}, g).textContent = `${id}: ${s.label || ""}`;
  }
  return svg;
}

// The states and transitions of a journey in the authoring format (`start`, states with
// `next`), as the definition export gives it.
export function fromDefinition(journey) {
  const states = (journey.states || []).map((s) => {
    const kind = s.chat !== undefined ? "chat" : s.tool !== undefined || s.tools !== undefined ? "tool" : s.fork ? "fork" : s.journey ? "journey" : "state";
    const label = s.chat || (s.tool ? `call ${Array.isArray(s.tool) ? s.tool.join(", ") : s.tool}` : s.tools ? `call ${[].concat(s.tools).join(", ")}` : s.journey ? `run ${s.journey}` : s.fork ? "choose the way on" : s.id);
    return { id: s.id, kind, label: String(label) };
  });
  const transitions = [];
  let n = 0;
  const edges = (from, next) => {
    if (next === undefined || next === null) return;
    for (const t of Array.isArray(next) ? next : [next]) {
      if (typeof t === "string") transitions.push({ id: `e${++n}`, from, to: t, condition: null });
      else if (t && t.to) transitions.push({ id: t.id || `e${++n}`, from, to: t.to, condition: t.when || t.condition || null });
    }
  };
  edges("initial", journey.start);
  for (const s of journey.states || []) edges(s.id, s.next);
  return { states, transitions };
}
