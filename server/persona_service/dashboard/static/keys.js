// API keys: create (scopes, mode, expiry, IP allowlist), the secret shown
// once, list, revoke.

import { choices, get, post } from "./api.js";
import { badge, busy, checkboxes, checked, confirmDialog, errorBox, field, h, pager, secretPanel, select, table, when } from "./ui.js";

function status(key) {
  if (key.revokedAt) return badge("revoked");
  if (key.expiresAt && new Date(key.expiresAt) <= new Date()) return badge("expired");
  return badge("active");
}

function createForm(scopes, onCreated) {
  const name = h("input", { name: "name", required: true, maxlength: "100", autocomplete: "off" });
  const scopeBox = checkboxes("Scopes", scopes, { name: "scopes", checked: scopes.filter((s) => s.endsWith(":read")) });
  const mode = select([["live", "live (sk_live_)"], ["test", "test (sk_test_)"]], { name: "mode" });
  const expires = h("input", { type: "datetime-local", name: "expiresAt" });
  const allow = h("textarea", { name: "ipAllowlist", rows: "2", placeholder: "203.0.113.0/24" });
  const out = h("div", { class: "out", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create key");
  const form = h("form", { class: "panel", "aria-labelledby": "new-key" },
    h("h2", { id: "new-key" }, "New key"),
    h("div", { class: "grid" }, field("Name", name), field("Mode", mode),
      field("Expires (optional)", expires, "Your local time; the key stops working then."),
      field("IP allowlist (optional)", allow, "One address or CIDR range a line. Enterprise plan only.")),
    scopeBox, h("div", { class: "row" }, submit), out);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, out, async () => {
      const body = { name: name.value.trim(), scopes: checked(scopeBox), mode: mode.value };
      if (expires.value) body.expiresAt = new Date(expires.value).toISOString();
      const ranges = allow.value.split(/[\s,]+/).filter(Boolean);
      if (ranges.length) body.ipAllowlist = ranges;
      const made = await post("/v1/keys", body);
      out.replaceChildren(secretPanel(`Key “${made.key.name}” created. Copy its secret now: it is shown only once.`, made.secret,
        "Send it as Authorization: Bearer <secret>. Only a hash is stored; a lost secret cannot be shown again."));
      form.reset();
      onCreated();
    });
  });
  return form;
}

export function render(main) {
  const list = h("section", { "aria-labelledby": "keys-list" });
  const formSlot = h("div");
  main.append(h("h1", {}, "API keys"),
    h("p", { class: "muted" }, "Workspace credentials for Authorization: Bearer. A key can grant only scopes its creator holds."),
    formSlot, list);

  function reload() {
    list.replaceChildren(h("h2", { id: "keys-list" }, "Keys"),
      pager((cursor) => get("/v1/keys", { limit: 50, cursor }),
        (items) => table([
          ["Name", (k) => k.name],
          ["Prefix", (k) => h("code", {}, k.prefix)],
          ["Scopes", (k) => (k.scopes || []).join(", ")],
          ["Mode", (k) => k.mode],
          ["Created", (k) => when(k.createdAt)],
          ["Expires", (k) => when(k.expiresAt)],
          ["Status", status],
          ["", (k) => (k.revokedAt ? "" : revokeButton(k))],
        ], items, { caption: "API keys" }), { emptyText: "No keys yet." }));
  }

  function revokeButton(key) {
    const out = h("span");
    const button = h("button", { type: "button", class: "small danger", "aria-label": `Revoke ${key.name}` }, "Revoke");
    button.addEventListener("click", async () => {
      if (!(await confirmDialog(`Revoke “${key.name}”? Requests with it fail at once.`, "Revoke"))) return;
      await busy(button, out, async () => {
        await post(`/v1/keys/${encodeURIComponent(key.id)}/revoke`);
        reload();
      });
    });
    return h("span", {}, button, out);
  }

  choices("post", "/v1/keys", "scopes")
    .then((scopes) => formSlot.replaceChildren(createForm(scopes, reload)))
    .catch((error) => formSlot.replaceChildren(errorBox(error)));
  reload();
}
