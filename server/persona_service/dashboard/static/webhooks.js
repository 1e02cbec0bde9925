// Webhooks: endpoints (create with the secret shown once, subscribed
// events, enable/disable, delete), ping, the secret revealed on demand
// (every read is audited), and deliveries with their attempts, response
// bodies and replay.

import { choices, del, get, patch, post } from "./api.js";
import { badge, busy, checkboxes, checked, confirmDialog, errorBox, field, h, loading, pager, replace, secretPanel, select, table, when } from "./ui.js";

const path = (id, rest = "") => `/v1/webhooks/${encodeURIComponent(id)}${rest}`;

export function render(main, params, context) {
  if (params[0]) return detailView(main, params[0], context);
  return listView(main, context);
}

function listView(main, context) {
  const formSlot = h("div", {}, loading());
  const list = h("section", { "aria-labelledby": "endpoints" });
  main.append(h("h1", {}, "Webhooks"),
    h("p", { class: "muted" }, "Events of this workspace are POSTed, signed (X-Service-Signature), to each endpoint that subscribes to them, at least once."),
    formSlot, list);

  function reload() {
    replace(list, h("h2", { id: "endpoints" }, "Endpoints"),
      pager((cursor) => get("/v1/webhooks", { limit: 50, cursor }), (items) => table([
        ["URL", (e) => h("a", { href: `#/webhooks/${e.id}` }, e.url)],
        ["Events", (e) => e.events.join(", ")],
        ["Status", (e) => badge(e.enabled ? "enabled" : "disabled")],
        ["Created", (e) => when(e.createdAt)],
      ], items, { caption: "Webhook endpoints" }), { emptyText: "No endpoints yet." }));
  }

  choices("post", "/v1/webhooks", "events").then((types) => {
    const url = h("input", { type: "url", name: "url", required: true, maxlength: "2048", placeholder: "https://example.com/hooks" });
    const description = h("input", { name: "description", maxlength: "500" });
    const events = checkboxes("Events", types, { name: "events", checked: ["*"] });
    const standard = h("input", { type: "checkbox", id: "standard-webhooks" });
    const out = h("div", { "aria-live": "polite" });
    const submit = h("button", { type: "submit", class: "primary" }, "Add endpoint");
    const form = h("form", { class: "panel", "aria-labelledby": "new-endpoint" }, h("h2", { id: "new-endpoint" }, "New endpoint"),
      h("div", { class: "grid" }, field("URL", url, "https, on a public address (the server may allow local ones in development)."), field("Description", description)),
      events, h("div", { class: "field inline" }, standard, h("label", { for: "standard-webhooks" }, "Also send Standard Webhooks headers")),
      h("div", { class: "row" }, submit), out);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(submit, out, async () => {
        const made = await post("/v1/webhooks", { url: url.value.trim(), description: description.value.trim(), events: checked(events), standardWebhooks: standard.checked });
        out.replaceChildren(secretPanel("Endpoint created. Its signing secret, shown once:", made.secret, "Verify each delivery's X-Service-Signature with it. You can reveal it again later (audited)."),
          h("p", {}, h("a", { class: "button", href: `#/webhooks/${made.endpoint.id}` }, "Open endpoint")));
        form.reset();
        reload();
      });
    });
    replace(formSlot, form);
  }).catch((error) => replace(formSlot, errorBox(error)));
  reload();
}

function attempts(delivery) {
  if (!(delivery.attempts || []).length) return h("p", { class: "muted" }, "No attempt yet.");
  return h("ol", { class: "attempts" }, delivery.attempts.map((a) => h("li", {},
    h("p", {}, `Attempt ${a.attempt} · `, when(a.attemptedAt), ` · ${a.statusCode ? `HTTP ${a.statusCode}` : "no answer"} · ${a.latencyMs} ms `,
      badge(a.success ? "succeeded" : "failed"), a.error ? ` ${a.error}` : ""),
    a.responseBody ? h("pre", { class: "wrap response-body", "aria-label": "Response body" }, a.responseBody) : null)));
}

function detailView(main, id) {
  const header = h("div", {}, loading("Loading endpoint"));
  const actions = h("div", { class: "row wrap actions" });
  const out = h("div", { "aria-live": "polite" });
  const deliveries = h("section", { class: "panel", "aria-labelledby": "deliveries" });
  main.append(h("p", {}, h("a", { href: "#/webhooks" }, "← Webhooks")), header, actions, out, deliveries);
  let types = []; // the event types an endpoint may subscribe to, from the contract

  async function reload() {
    try {
      const [endpoint, found] = await Promise.all([get(path(id)), choices("post", "/v1/webhooks", "events").catch(() => [])]);
      types = found;
      show(endpoint);
    } catch (error) {
      replace(header, errorBox(error));
    }
  }

  function eventsForm(e) {
    const boxes = checkboxes("Subscribed events", types, { name: "events", checked: e.events });
    const save = h("button", { type: "submit" }, "Save events");
    const form = h("form", { class: "panel", "aria-label": "Subscribed events" }, boxes, save);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(save, out, async () => show(await patch(path(id), { events: checked(boxes) })));
    });
    return form;
  }

  function show(e) {
    replace(header, h("h1", {}, "Endpoint ", h("code", {}, e.id)),
      h("dl", { class: "dl" }, h("dt", {}, "URL"), h("dd", {}, e.url), h("dt", {}, "Events"), h("dd", {}, e.events.join(", ")),
        h("dt", {}, "Status"), h("dd", {}, badge(e.enabled ? "enabled" : "disabled")),
        h("dt", {}, "Description"), h("dd", {}, e.description || "—"),
        h("dt", {}, "Standard Webhooks"), h("dd", {}, e.standardWebhooks ? "yes" : "no"),
        h("dt", {}, "Secret created"), h("dd", {}, when(e.secretCreatedAt)),
        e.previousSecretExpiresAt ? [h("dt", {}, "Previous secret valid until"), h("dd", {}, when(e.previousSecretExpiresAt))] : null));
    const button = (label, run, attrs = {}) => {
      const b = h("button", { type: "button", ...attrs }, label);
      b.addEventListener("click", () => busy(b, out, run));
      return b;
    };
    replace(actions,
      button("Send test ping", () => watched(async () => {
        const ping = await post(path(id, "/ping"));
        replace(out, h("p", { class: "success", role: "status" }, `Ping queued (event ${ping.eventId}).`));
      }), { class: "primary" }),
      button("Reveal secret", async () => {
        const secret = await get(path(id, "/secret"));
        replace(out, secretPanel("Signing secret (this read is recorded in the audit log):", secret.secret),
          secret.previousSecret ? secretPanel("Previous secret, valid until " + new Date(secret.previousSecretExpiresAt).toLocaleString(), secret.previousSecret) : null);
      }),
      button(e.enabled ? "Disable" : "Enable", async () => show(await patch(path(id), { enabled: !e.enabled }))),
      button("Delete", async () => {
        if (!(await confirmDialog("Delete this endpoint and its delivery records?", "Delete"))) return;
        await del(path(id));
        location.hash = "#/webhooks";
      }, { class: "danger" }));
    header.append(types.length ? h("details", {}, h("summary", {}, "Change subscribed events"), eventsForm(e)) : null);
  }

  const filter = select(["", "pending", "succeeded", "dead_lettered"], { name: "status" });
  const refresh = h("button", { type: "button" }, "Refresh");
  const items = h("div", { "aria-live": "polite" });
  replace(deliveries, h("div", { class: "row between wrap" }, h("h2", { id: "deliveries" }, "Deliveries"),
    h("div", { class: "row" }, field("Status", filter), refresh)), items);

  function loadDeliveries() {
    replace(items, pager((cursor) => get(path(id, "/deliveries"), { limit: 20, cursor, status: filter.value }), (list) => h("ul", { class: "deliveries" }, list.map(deliveryItem)),
      { emptyText: "No deliveries yet. Send a test ping." }));
  }

  function deliveryItem(d) {
    const itemOut = h("div");
    const replay = h("button", { type: "button", class: "small" }, "Replay");
    replay.addEventListener("click", () => busy(replay, itemOut, () => watched(async () => {
      const made = await post(path(id, `/deliveries/${encodeURIComponent(d.id)}/replay`));
      replace(out, h("p", { class: "success", role: "status" }, `Replay of ${d.id} queued as ${made.id}.`));
    })));
    return h("li", { class: "delivery", dataset: { delivery: d.id, status: d.status } },
      h("details", {},
        h("summary", {}, h("code", {}, d.eventType), " ", badge(d.status), ` · ${d.attemptCount} attempt${d.attemptCount === 1 ? "" : "s"} · `, when(d.createdAt),
          d.replayOf ? h("span", { class: "muted" }, ` · replay of ${d.replayOf}`) : null),
        h("p", { class: "muted" }, "Delivery ", h("code", {}, d.id), " · event ", h("code", {}, d.eventId),
          d.nextAttemptAt && d.status === "pending" ? [" · next attempt ", when(d.nextAttemptAt)] : null),
        attempts(d)),
      h("div", { class: "row" }, replay), itemOut);
  }

  // A ping or a replay: once the worker has made and attempted the new
  // delivery (polled quietly), the list is shown again.
  let stopped = false;
  const newest = async () => ((await get(path(id, "/deliveries"), { limit: 1 })).items || [])[0];
  async function watched(action) {
    const before = await newest().catch(() => undefined);
    await action();
    (async () => {
      for (let i = 0; i < 20 && !stopped; i++) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        const latest = await newest().catch(() => undefined);
        if (latest && (!before || latest.id !== before.id) && latest.attemptCount > 0) break;
      }
      if (!stopped) loadDeliveries();
    })();
  }

  filter.addEventListener("change", loadDeliveries);
  refresh.addEventListener("click", loadDeliveries);
  reload();
  loadDeliveries();
  return () => { stopped = true; };
}
