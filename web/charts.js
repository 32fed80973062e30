// charts.js — SVG charts drawn from a Compare run's own statistics (no library, no network).
const SVG = "http://www.w3.org/2000/svg";
const COLORS = { none: "#7a8194", prompt_lookup: "#2e62d9", neural: "#d9822e" };

function svg(width, height) {
  const root = document.createElementNS(SVG, "svg");
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  return root;
}

function add(parent, tag, attrs, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) element.setAttribute(key, value);
  if (text !== undefined) element.textContent = text;
  parent.append(element);
  return element;
}

// series: [{name, values: [S_1, S_2, ...]}]; S_0 = 1 is drawn for every series.
export function survivalChart(container, series) {
  const width = 420, height = 220, left = 48, bottom = 38, top = 10;
  const maxLength = Math.max(1, ...series.map((s) => s.values.length));
  const root = svg(width, height);
  const x = (i) => left + (i / maxLength) * (width - left - 10);
  const y = (v) => top + (1 - v) * (height - top - bottom);
  add(root, "line", { x1: left, y1: y(0), x2: width - 10, y2: y(0), stroke: "#999" });
  add(root, "line", { x1: left, y1: y(0), x2: left, y2: y(1), stroke: "#999" });
  for (const v of [0, 0.5, 1]) add(root, "text", { x: 20, y: y(v) + 4, "font-size": 10 }, v.toFixed(1));
  for (let i = 0; i <= maxLength; i++) add(root, "text", { x: x(i) - 3, y: height - 24, "font-size": 10 }, String(i));
  add(root, "text", { x: left, y: height - 6, "font-size": 11 }, "draft position i (tokens into the draft)");
  add(root, "text", { x: 12, y: top + (height - top - bottom) / 2 + 40, "font-size": 11,
    transform: `rotate(-90 12 ${top + (height - top - bottom) / 2 + 40})` }, "share surviving to i");
  series.forEach((s, index) => {
    const points = [1, ...s.values].map((v, i) => `${x(i)},${y(v ?? 0)}`).join(" ");
    add(root, "polyline", { points, fill: "none", stroke: COLORS[s.name] || "#333", "stroke-width": 2 });
    add(root, "text", { x: width - 130, y: top + 12 + index * 13, "font-size": 11, fill: COLORS[s.name] || "#333" }, s.name);
  });
  container.replaceChildren(root);
}

// rows: [{name, draft, verify, sync, other}] seconds (verify: host side; sync: waiting on the GPU)
export function timeChart(container, rows) {
  const width = 420, barHeight = 22, left = 100, height = rows.length * (barHeight + 8) + 40;
  const root = svg(width, height);
  const total = Math.max(1e-9, ...rows.map((r) => r.draft + r.verify + r.sync + r.other));
  const parts = [["draft", "#d9822e"], ["verify", "#2e62d9"], ["sync", "#7a9be8"], ["other", "#b8bdc9"]];
  rows.forEach((row, index) => {
    const y = 4 + index * (barHeight + 8);
    add(root, "text", { x: 2, y: y + 15, "font-size": 11 }, row.name);
    let x = left;
    for (const [key, color] of parts) {
      const w = (row[key] / total) * (width - left - 10);
      add(root, "rect", { x, y, width: Math.max(0, w), height: barHeight, fill: color }).append(
        Object.assign(document.createElementNS(SVG, "title"), { textContent: `${key}: ${row[key].toFixed(2)} s` }));
      x += w;
    }
  });
  parts.forEach(([key, color], index) => {
    add(root, "rect", { x: left + index * 80, y: height - 30, width: 10, height: 10, fill: color });
    add(root, "text", { x: left + 14 + index * 80, y: height - 21, "font-size": 10 }, key);
  });
  add(root, "text", { x: left, y: height - 4, "font-size": 11 },
    `seconds per answer, bar length to scale (longest ${total.toFixed(2)} s)`);
  container.replaceChildren(root);
}
