// The audit log: every write, security failure and admin action of the
// organization, filterable by the API's filters, newest first, a page at a
// time (Previous and Next over the API's cursors).

import { get } from "./api.js";
import { badge, field, h, idCode, pages, replace, select, table, when } from "./ui.js";

// A page's events: few enough that the page is short and its pager is on screen.
const PAGE_SIZE = 25;

const FILTERS = [
  ["action", "Action", "e.g. api_key.create"],
  ["resourceType", "Resource type", "e.g. persona"],
  ["resourceId", "Resource id", ""],
  ["actorUserId", "Actor user", "usr_…"],
  ["credentialId", "Credential", "key_… or jwt:…"],
  ["requestId", "Request id", "x-request-id"],
];

export function render(main) {
  const inputs = Object.fromEntries(FILTERS.map(([name, , placeholder]) => [name, h("input", { name, placeholder, autocomplete: "off" })]));
  const outcome = select(["", "success", "failure"], { name: "outcome" });
  const results = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "filters", role: "search", "aria-label": "Audit filters" },
    FILTERS.map(([name, label]) => field(label, inputs[name])), field("Outcome", outcome),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Filter"), h("button", { type: "reset" }, "Clear")));
  main.append(h("h1", {}, "Audit log"), form, results);

  function search() {
    const query = { outcome: outcome.value };
    for (const [name, input] of Object.entries(inputs)) query[name] = input.value.trim();
    replace(results, pages((cursor) => get("/v1/audit/events", { ...query, limit: PAGE_SIZE, cursor }),
      (items) => table([
        ["When", (e) => when(e.occurredAt)],
        ["Action", (e) => h("code", {}, e.action)],
        ["Outcome", (e) => badge(e.outcome === "success" ? "succeeded" : "failed", e.outcome)],
        ["Status", (e) => [String(e.status), e.errorCode ? ` ${e.errorCode}` : ""]],
        ["Resource", (e) => [e.resourceType, e.resourceId ? [" ", idCode(e.resourceId)] : ""]],
        ["Who", (e) => [e.actorUserId ? idCode(e.actorUserId) : "—", h("br"), h("small", { class: "muted" }, idCode(e.credentialId))]],
        ["Request", (e) => idCode(e.requestId, { class: "request-id" })],
        ["Client", (e) => e.clientIp || "—"],
      ], items, { caption: "Audit events" }), { emptyText: "No audit events match.", label: "Audit log pages" }));
  }
  form.addEventListener("submit", (event) => { event.preventDefault(); search(); });
  form.addEventListener("reset", () => setTimeout(search));
  search();
}
