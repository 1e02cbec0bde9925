// A persona's fork tree (GET /v1/personas/{id}/lineage) drawn as an SVG
// graph: the root at the top, each fork below its parent, the persona being
// viewed highlighted; every node links to its persona. A nested list says
// the same for screen readers and narrow screens.

import { h, s } from "./ui.js";

const W = 150;
const H = 48;
const GAP_X = 24;
const GAP_Y = 40;

// Leaves take consecutive columns; a parent sits over the middle of its children.
function layout(node, depth, next, placed) {
  const children = node.children || [];
  let x;
  if (!children.length) {
    x = next.column++;
  } else {
    const xs = children.map((child) => layout(child, depth + 1, next, placed));
    x = (xs[0] + xs[xs.length - 1]) / 2;
  }
  placed.push({ node, x, depth });
  return x;
}

function edges(placed) {
  const at = new Map(placed.map((p) => [p.node.personaId, p]));
  const lines = [];
  for (const p of placed) {
    for (const child of p.node.children || []) {
      const c = at.get(child.personaId);
      const x1 = p.x * (W + GAP_X) + W / 2;
      const y1 = p.depth * (H + GAP_Y) + H;
      const x2 = c.x * (W + GAP_X) + W / 2;
      const y2 = c.depth * (H + GAP_Y);
      const mid = (y1 + y2) / 2;
      lines.push(s("path", { class: "edge", d: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}` }));
    }
  }
  return lines;
}

function label(node) {
  const versions = (node.versions || []).map((v) => `v${v.version} ${v.kind}${v.note ? `: ${v.note}` : ""}`).join("; ");
  return `${node.slug} · v${node.version} · ${node.state}${node.forkNote ? ` · fork note: ${node.forkNote}` : ""}${versions ? ` · ${versions}` : ""}`;
}

function list(node, current) {
  return h("li", {},
    h("a", { href: `#/personas/${node.personaId}`, "aria-current": node.personaId === current ? "page" : null }, node.slug),
    ` v${node.version}, ${node.state}${node.forkNote ? ` (${node.forkNote})` : ""}`,
    (node.children || []).length ? h("ul", {}, node.children.map((child) => list(child, current))) : null);
}

export function lineageGraph(lineage, current) {
  const placed = [];
  const next = { column: 0 };
  layout(lineage.root, 0, next, placed);
  const depth = Math.max(...placed.map((p) => p.depth)) + 1;
  const width = next.column * (W + GAP_X) - GAP_X;
  const height = depth * (H + GAP_Y) - GAP_Y;
  const nodes = placed.map(({ node, x, depth: d }) => {
    const here = node.personaId === current;
    return s("a", { href: `#/personas/${node.personaId}`, class: `node state-${node.state}${here ? " current" : ""}`, "aria-label": label(node) },
      s("title", {}, label(node)),
      s("rect", { x: x * (W + GAP_X), y: d * (H + GAP_Y), width: W, height: H, rx: 8 }),
      s("text", { x: x * (W + GAP_X) + 10, y: d * (H + GAP_Y) + 20, class: "slug" }, node.slug.length > 18 ? `${node.slug.slice(0, 17)}…` : node.slug),
      s("text", { x: x * (W + GAP_X) + 10, y: d * (H + GAP_Y) + 38, class: "meta" },
        `v${node.version} · ${node.state}${node.forkOrdinal ? ` · fork ${node.forkOrdinal}` : ""}`));
  });
  const svg = s("svg", { class: "lineage", viewBox: `-2 -2 ${width + 4} ${height + 4}`, width: width + 4, height: height + 4, role: "group", "aria-label": `Lineage: ${lineage.size} personas` },
    edges(placed), nodes);
  return h("div", { class: "lineage-box" },
    h("div", { class: "graph-wrap" }, svg),
    h("details", {}, h("summary", {}, "Lineage as a list"), h("ul", { class: "tree" }, list(lineage.root, current))));
}
