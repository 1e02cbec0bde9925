// Usage: tokens, cost and generations over time (GET /v1/usage: a bar chart
// by UTC day, or a table by persona or key), rate-limit headroom from the
// X-RateLimit-* headers every answer carries, the organization's limits and
// quotas (the `api.rate_limit.*` config items) with their reset times, and
// the generation concurrency.

import { get, limits, session } from "./api.js";
import { busy, errorBox, field, h, loading, replace, s, select, table, when, cost } from "./ui.js";

const METRICS = [["costUsdMicros", "Cost"], ["generations", "Generations"], ["inputTokens", "Input tokens"], ["outputTokens", "Output tokens"]];
const shown = (metric, value, bucket = {}) => (metric === "costUsdMicros" ? cost(value, bucket.unpricedGenerations) : String(value));

// Bars of one metric per UTC day, in plain SVG: a bar per day (its value in a <title>), the
// largest value on the axis, the first and last day under it.
function chart(buckets, metric, label) {
  const width = 640;
  const height = 180;
  const top = Math.max(1, ...buckets.map((b) => Number(b[metric])));
  const step = width / Math.max(1, buckets.length);
  const bar = Math.max(1, step * 0.8);
  const total = buckets.reduce((sum, b) => sum + Number(b[metric]), 0);
  return s("svg", { viewBox: `0 0 ${width} ${height + 24}`, class: "chart", role: "img",
    "aria-label": `${label} by UTC day, ${buckets.length} days: ${shown(metric, total)} in all` },
    s("line", { x1: 0, y1: height, x2: width, y2: height, class: "axis" }),
    s("text", { x: 2, y: 12, class: "tick" }, shown(metric, top)),
    buckets.map((b, i) => {
      const tall = (Number(b[metric]) / top) * (height - 16);
      return s("rect", { x: i * step + (step - bar) / 2, y: height - tall, width: bar, height: tall, class: "bar", "data-day": b.key, "data-value": String(b[metric]) },
        s("title", {}, `${b.key}: ${shown(metric, b[metric], b)}`));
    }),
    buckets.length ? s("text", { x: 2, y: height + 18, class: "tick" }, buckets[0].key) : null,
    buckets.length > 1 ? s("text", { x: width - 2, y: height + 18, class: "tick", "text-anchor": "end" }, buckets[buckets.length - 1].key) : null);
}

function overTime() {
  const days = select([["7", "7 days"], ["30", "30 days"], ["90", "90 days"]], { name: "days" });
  days.value = "30";
  const groupBy = select([["day", "Day (UTC)"], ["persona", "Persona"], ["key", "API key"]], { name: "groupBy" });
  const metric = select(METRICS, { name: "metric" });
  const out = h("div", {}, loading());
  const panel = h("section", { class: "panel", "aria-labelledby": "over-time" }, h("h2", { id: "over-time" }, "Usage over time"),
    h("div", { class: "row" }, field("Range", days), field("Group by", groupBy), field("Show", metric)), out);

  async function update() {
    const start = new Date(Date.now() - (Number(days.value) - 1) * 86400000).toISOString().slice(0, 10);
    const usage = await get("/v1/usage", { start, groupBy: groupBy.value });
    const label = METRICS.find(([name]) => name === metric.value)[1];
    const t = usage.totals;
    const sum = h("p", { dataset: { usageTotals: "" } },
      `${t.generations} generations · ${t.inputTokens} input and ${t.outputTokens} output tokens · ${cost(t.costUsdMicros, t.unpricedGenerations)}`,
      ` from `, when(usage.start), ` to `, when(usage.end), " (days in UTC).");
    const rows = usage.buckets;
    const keyName = { day: "Day (UTC)", persona: "Persona", key: "API key" }[usage.groupBy];
    const columns = [[keyName, (b) => (usage.groupBy === "persona" ? h("a", { href: `#/personas/${b.key}` }, b.key) : h("code", {}, b.key || "—"))],
      ...METRICS.map(([name, title]) => [title, (b) => shown(name, b[name], b)])];
    const listed = rows.length ? table(columns, rows, { caption: `Usage by ${keyName.toLowerCase()}` }) : h("p", { class: "muted" }, "No usage in this range.");
    replace(out, sum, usage.groupBy === "day"
      ? [chart(rows, metric.value, label), h("details", {}, h("summary", {}, "Every day as a table"), listed)]
      : listed);
  }

  const run = () => update().catch((error) => replace(out, errorBox(error)));
  for (const control of [days, groupBy, metric]) control.addEventListener("change", run);
  run();
  return panel;
}

// `"minute";q=600;w=60, "day";q=50000;w=86400` -> {minute: {q, w}, day: {q, w}}
function policies(header) {
  const found = {};
  for (const part of header.split(",")) {
    const name = (part.match(/"([^"]+)"/) || [])[1];
    if (!name) continue;
    found[name] = Object.fromEntries([...part.matchAll(/;(\w+)=(\d+)/g)].map((m) => [m[1], Number(m[2])]));
  }
  return found;
}

function nextMonth() {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
}

function headroom(seen) {
  if (!seen) return h("p", { class: "muted" }, "No answer with rate-limit headers yet.");
  const resetIn = Math.max(0, Math.round(seen.reset - Date.now() / 1000));
  const used = seen.limit - seen.remaining;
  const low = seen.remaining < seen.limit * 0.1 && resetIn > 30;
  const day = policies(seen.policy).day;
  return h("div", {},
    h("div", { class: "meter-row" },
      h("label", { for: "minute-meter" }, `Requests this minute: ${used} of ${seen.limit} used, ${seen.remaining} left`),
      h("meter", { id: "minute-meter", min: "0", max: String(seen.limit), value: String(used), low: String(seen.limit * 0.7), high: String(seen.limit * 0.9), optimum: "0" })),
    h("p", { class: "muted" }, `Window of ${seen.windowSeconds} s; resets in ${resetIn} s (`, when(new Date(seen.reset * 1000).toISOString()), ")."),
    day ? h("p", {}, `Daily cap: ${day.q} requests a day.`) : null,
    low ? h("p", { class: "warning" }, "Under 10% of the cap left with more than 30 s to the reset: slow down.") : null);
}

// Generations this month, counted from the completed runs in the event log.
async function generationsThisMonth() {
  const start = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)).toISOString();
  let count = 0;
  let token = "";
  for (let page = 0; page < 10; page++) {
    const r = await get("/v1/events", { type: "generation.run.completed", limit: 100, cursor: token });
    const events = r.items || [];
    const recent = events.filter((e) => e.occurredAt >= start);
    count += recent.length;
    token = r.nextCursor || "";
    if (!token || recent.length < events.length) return { count, complete: true };
  }
  return { count, complete: false };
}

export function render(main) {
  const rate = h("section", { class: "panel", "aria-labelledby": "rate" });
  const quotas = h("section", { class: "panel", "aria-labelledby": "quotas" }, h("h2", { id: "quotas" }, "Limits and quotas"), loading());
  const refresh = h("button", { type: "button" }, "Refresh");
  const out = h("div");
  main.append(h("div", { class: "row between" }, h("h1", {}, "Usage"), refresh), out, overTime(), rate, quotas);

  async function update() {
    const [items, generations] = await Promise.all([
      get("/v1/config", { prefix: "api.rate_limit.", limit: 100 }),
      generationsThisMonth().catch(() => null),
    ]);
    replace(rate, h("h2", { id: "rate" }, "Rate-limit headroom"), headroom(limits.seen));
    const plan = session.identity && session.identity.subscription && session.identity.subscription.plan;
    replace(quotas, h("h2", { id: "quotas" }, "Limits and quotas"),
      plan ? h("p", {}, `Plan: ${plan}.`) : null,
      table([
        ["Limit", (i) => h("code", {}, i.key.replace("api.rate_limit.", ""))],
        ["Value", (i) => String(i.value)],
        ["Source", (i) => i.source],
        ["Resets", (i) => (i.key.endsWith("_per_month") ? when(nextMonth()) : i.key.endsWith("per_day") ? "daily (UTC)" : i.key.endsWith("per_minute") ? "every minute" : "—")],
      ], items.items || [], { caption: "Limits" }),
      generations ? h("p", {}, `Generations completed this month: ${generations.count}${generations.complete ? "" : "+"} (quota resets `, when(nextMonth()), ").") : null,
      h("p", { class: "muted" }, "Concurrency: concurrent_generations is how many generation runs may run at once; a stream (persona creation, chat) also holds one of the organization's open-stream slots while it is open."));
  }

  refresh.addEventListener("click", () => busy(refresh, out, update));
  replace(rate, h("h2", { id: "rate" }, "Rate-limit headroom"), loading());
  update().catch((error) => replace(out, errorBox(error)));
}
