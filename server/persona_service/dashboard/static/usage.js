// Usage: rate-limit headroom from the X-RateLimit-* headers every answer
// carries, the organization's limits and quotas (the `api.rate_limit.*`
// config items) with their reset times, and the generation concurrency.

import { get, limits, session } from "./api.js";
import { busy, errorBox, h, loading, replace, table, when } from "./ui.js";

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
  main.append(h("div", { class: "row between" }, h("h1", {}, "Usage"), refresh), out, rate, quotas);

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
