// A persona's versions (GET /v1/personas/{id}/versions): each refine,
// regenerate or rollback is one. Read one, compare two field by field
// (GET …/diff), roll back to one (POST …/rollback: a new version
// equal to it), and copy the model id pinned to it (persona://<id>@<n>).

import { get, post } from "./api.js";
import { busy, confirmDialog, copyButton, errorBox, field, h, load, replace, table, when } from "./ui.js";

const path = (id, rest = "") => `/v1/personas/${encodeURIComponent(id)}${rest}`;
const shown = (value) => (value === undefined || value === null ? "—" : typeof value === "string" ? value : JSON.stringify(value, null, 1));

async function allVersions(id) {
  const items = [];
  let cursor = "";
  do {
    const page = await get(path(id, "/versions"), { limit: 100, cursor });
    items.push(...(page.items || []));
    cursor = page.nextCursor || "";
  } while (cursor);
  return items;
}

function diffView(diff) {
  const changes = diff.changes || [];
  if (!changes.length) return h("p", { role: "status" }, `v${diff.fromVersion} and v${diff.toVersion} are the same.`);
  return table([
    ["Field", (c) => h("code", {}, c.field)],
    [`v${diff.fromVersion}`, (c) => h("pre", { class: "wrap diff-before" }, shown(c.before))],
    [`v${diff.toVersion}`, (c) => h("pre", { class: "wrap diff-after" }, shown(c.after))],
  ], changes, { caption: `Changes from v${diff.fromVersion} to v${diff.toVersion}` });
}

function versionView(v) {
  const soul = v.soul || {};
  return h("div", { class: "version-detail", "aria-label": `Version ${v.version}` },
    h("h3", {}, `Version ${v.version}`),
    h("dl", { class: "dl" }, h("dt", {}, "Name"), h("dd", {}, soul.name || ""), h("dt", {}, "Desire"), h("dd", {}, soul.desire || ""),
      h("dt", {}, "Traits"), h("dd", {}, (soul.traits || []).join(", ")), h("dt", {}, "Greeting"), h("dd", {}, (v.voice || {}).greeting || "")),
    h("div", { class: "row" }, h("code", {}, `persona://${v.personaId}@${v.version}`), copyButton(`persona://${v.personaId}@${v.version}`, "Copy pinned model id")));
}

// `persona` the persona as shown; `writable` whether it may be rolled back; `show(persona)` re-renders the page.
export function versionsSection(persona, writable, show) {
  const box = h("div");
  load(box, "Loading versions", () => allVersions(persona.id), (versions) => render(versions));

  function render(versions) {
    const detail = h("div", { "aria-live": "polite" });
    const out = h("div", { "aria-live": "polite" });
    const numbers = versions.map((v) => v.version);
    const picker = (name, value) => h("select", { name }, numbers.map((n) => h("option", { value: n, selected: n === value }, `v${n}`)));
    const from = picker("fromVersion", numbers[1] || numbers[0]);
    const to = picker("toVersion", numbers[0]);
    const compare = h("button", { type: "submit" }, "Compare");
    const form = h("form", { class: "row wrap", "aria-label": "Compare versions" }, field("From", from), field("To", to), compare);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(compare, detail, async () => replace(detail, diffView(await get(path(persona.id, "/diff"), { fromVersion: from.value, toVersion: to.value }))));
    });
    const view = (v) => {
      const b = h("button", { type: "button", class: "small" }, "View");
      b.addEventListener("click", () => load(detail, "Loading version", () => get(path(persona.id, `/versions/${v.version}`)), versionView));
      return b;
    };
    const rollback = (v) => {
      if (!writable || v.version === persona.version) return null;
      const b = h("button", { type: "button", class: "small" }, `Roll back to v${v.version}`);
      b.addEventListener("click", async () => {
        if (!(await confirmDialog(`Roll back to version ${v.version}? A new version equal to it is made.`, "Roll back"))) return;
        busy(b, out, async () => show(await post(path(persona.id, "/rollback"), { version: v.version })));
      });
      return b;
    };
    return h("div", {},
      table([
        ["Version", (v) => `v${v.version}${v.version === persona.version ? " (current)" : ""}`],
        ["Kind", (v) => (v.sourceVersion ? `${v.kind} to v${v.sourceVersion}` : v.kind)],
        ["Note", (v) => v.note || v.instruction || "—"],
        ["Made", (v) => when(v.createdAt)],
        ["", (v) => h("div", { class: "row" }, view(v), rollback(v))],
      ], versions, { caption: "Versions" }),
      out, numbers.length > 1 ? form : null, detail);
  }
  return box;
}

// The cost preview of a create (POST /v1/personas/preview): estimated tokens and cost, and the quota it would use.
export async function previewBox(body) {
  try {
    const p = await post("/v1/personas/preview", body);
    const q = p.quota;
    return h("div", { class: q.wouldExceed ? "warning" : "success", role: "status", "aria-label": "Cost preview" },
      h("p", {}, h("strong", {}, "Estimate: "), `${p.estimatedInputTokens + p.estimatedOutputTokens} tokens `,
        `(${p.estimatedInputTokens} in, ${p.estimatedOutputTokens} out) on ${p.model}, ${p.unpriced ? "cost unknown (no price for the model)" : `about $${(p.estimatedCostUsdMicros / 1e6).toFixed(6)}`}.`),
      h("p", {}, `Uses ${q.wouldUse} of the monthly generation quota: ${q.used} of ${q.limit} used, ${q.remaining} left`,
        q.wouldExceed ? " — this generation would be refused." : "."),
      h("p", { class: "muted" }, "Nothing was spent by this preview."));
  } catch (error) {
    return errorBox(error);
  }
}
