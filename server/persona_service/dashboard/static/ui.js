// DOM helpers. Text from the API only ever goes in as text nodes or
// attribute values (never innerHTML), so nothing it holds can run.

import { aborted, ApiError, forget } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";

function build(element, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.setAttribute("class", value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (!(element instanceof SVGElement) && name in element && typeof value !== "string" && name !== "list") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// h("button", {type: "button", onclick}, "Label")
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG, tag), attrs, children);

export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

let ids = 0;
export const uid = (prefix = "f") => `${prefix}-${++ids}`;

// A labelled control: field("Name", h("input", {...})).
export function field(label, control, hint) {
  control.id = control.id || uid();
  const hintId = hint ? uid("hint") : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control,
    hint ? h("small", { id: hintId, class: "muted" }, hint) : null);
}

export function select(options, attrs = {}) {
  return h("select", attrs, options.map((o) => (Array.isArray(o) ? h("option", { value: o[0] }, o[1]) : h("option", { value: o }, o || "any"))));
}

export function checkboxes(legend, values, { name, checked = [] } = {}) {
  return h("fieldset", { class: "checks" }, h("legend", {}, legend), values.map((value) => {
    const id = uid("c");
    return h("span", { class: "check" },
      h("input", { type: "checkbox", id, name, value, checked: checked.includes(value) }),
      h("label", { for: id }, value));
  }));
}

export const checked = (fieldset) => [...fieldset.querySelectorAll("input:checked")].map((i) => i.value);

export const loading = (what = "Loading") => h("p", { class: "loading", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), `${what}…`);
export const empty = (text, ...actions) => h("div", { class: "empty" }, h("p", {}, text), actions);

// An API error as the user sees it: the envelope's message, its code, and the
// request id to quote to support.
function signInAgain() {
  forget();
  location.reload();
}

export function errorBox(error) {
  if (!(error instanceof ApiError)) {
    return h("div", { class: "error", role: "alert" }, h("strong", {}, "Something went wrong: "), String(error && error.message || error));
  }
  const details = Object.keys(error.details || {}).length ? h("details", {}, h("summary", {}, "Details"), h("pre", {}, JSON.stringify(error.details, null, 2))) : null;
  return h("div", { class: "error", role: "alert", dataset: { code: error.code } },
    h("p", {}, h("strong", {}, error.message)),
    h("p", { class: "muted" }, `${error.code}${error.status ? ` · HTTP ${error.status}` : ""}`,
      error.requestId ? [" · request id ", h("code", { class: "request-id" }, error.requestId)] : null),
    details,
    error.code === "unauthorized" && error.status === 401 && document.querySelector("nav#nav") ? h("button", { type: "button", onclick: signInAgain }, "Sign in again") : null);
}

// Run an action from a button: disabled while it runs, the error shown in `out`.
export async function busy(button, out, action) {
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  if (out) out.replaceChildren();
  try {
    return await action();
  } catch (error) {
    if (aborted(error)) return undefined;
    if (out) out.replaceChildren(errorBox(error));
    else throw error;
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
}

export async function load(container, what, fetcher, render) {
  replace(container, loading(what));
  try {
    const data = await fetcher();
    replace(container, render(data));
  } catch (error) {
    if (aborted(error)) return;
    replace(container, errorBox(error), h("button", { type: "button", onclick: () => load(container, what, fetcher, render) }, "Retry"));
  }
}

// A table in a scrolling wrapper (narrow screens scroll it, not the page).
export function table(columns, rows, { caption } = {}) {
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption || "table" },
    h("table", {}, caption ? h("caption", { class: "sr-only" }, caption) : null,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c[0])))),
      h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => h("td", { dataset: { label: c[0] } }, h("div", { class: "cell" }, c[1](row)))))))));
}

export function copyButton(text, label = "Copy") {
  const button = h("button", { type: "button", class: "small" }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy";
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  });
  return button;
}

// Something shown once (a new key's or endpoint's secret), with a copy button.
export function secretPanel(title, secret, note) {
  return h("div", { class: "secret", role: "status" },
    h("p", {}, h("strong", {}, title)),
    h("div", { class: "row" }, h("code", { class: "secret-value" }, secret), copyButton(secret)),
    note ? h("p", { class: "muted" }, note) : null);
}

export function confirmDialog(message, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "dialog", "aria-label": message },
      h("p", {}, message),
      h("div", { class: "row end" },
        h("button", { type: "button", onclick: () => dialog.close("cancel") }, "Cancel"),
        h("button", { type: "button", class: "primary", onclick: () => dialog.close("ok") }, confirmLabel)));
    dialog.addEventListener("close", () => { resolve(dialog.returnValue === "ok"); dialog.remove(); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

export const badge = (text, kind = text) => h("span", { class: `badge badge-${kind}` }, text);

export function when(timestamp) {
  if (!timestamp) return "—";
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? String(timestamp) : h("time", { datetime: timestamp, title: timestamp }, date.toLocaleString());
}

export function money(minor, currency = "usd") {
  return new Intl.NumberFormat(undefined, { style: "currency", currency: currency.toUpperCase() }).format(Number(minor) / 100);
}

// Cost in millionths of a US dollar.
export const micros = (value) => `$${(Number(value || 0) / 1e6).toFixed(6)}`;
// A cost that leaves out usage of models without a price (`unpriced` replies): never shown as if it were $0.
export const cost = (value, unpriced) => {
  if (!unpriced) return micros(value);
  return Number(value || 0) > 0 ? `at least ${micros(value)} (${unpriced === true ? "" : `${unpriced} `}unpriced)` : "unknown (no price for the model)";
};

// An id or key in a table: on one line, never broken inside; one longer than
// its column ends in an ellipsis, the whole of it in the tooltip (and still the
// text that is selected, copied and searched).
export const idCode = (value, attrs = {}) => (value ? h("code", { ...attrs, class: ["id", attrs.class].filter(Boolean).join(" "), title: value }, value) : "");

// A long list a page at a time (the audit log): `cursor`/`limit` → `items` +
// `nextCursor`, forward only, so the cursors of the pages seen are kept to go
// back. Previous and Next above the page and again below it, so one is on
// screen wherever the page is scrolled; the top one names the page shown.
export function pages(fetchPage, renderItems, { emptyText, label = "Pages" } = {}) {
  const cursors = [""]; // cursors[i]: the cursor that fetches page i + 1
  let at = 0;
  let next = "";
  let loaded = false;
  const list = h("div", { class: "pager-items" });
  const status = h("div");
  const where = h("span", { class: "muted", "aria-live": "polite" });
  const controls = (name) => {
    const prev = h("button", { type: "button", class: "small", "aria-label": "Previous page" }, "← Previous");
    const forward = h("button", { type: "button", class: "small", "aria-label": "Next page" }, "Next →");
    prev.addEventListener("click", () => go(at - 1, name === "bottom"));
    forward.addEventListener("click", () => go(at + 1, name === "bottom"));
    // A navigation landmark, but not a <nav>: the stylesheet's nav is the sidebar (folded away on a phone).
    return { nav: h("div", { role: "navigation", class: `pages pages-${name}`, "aria-label": `${label} (${name})`, hidden: true }, prev, name === "top" ? where : null, forward), prev, forward };
  };
  const top = controls("top");
  const bottom = controls("bottom");
  const box = h("div", { class: "pager" }, top.nav, status, list, bottom.nav);

  function show() {
    const single = at === 0 && !next;
    for (const c of [top, bottom]) {
      c.nav.hidden = single || !loaded;
      c.prev.disabled = at === 0;
      c.forward.disabled = !next;
    }
    bottom.nav.hidden ||= !list.childElementCount;
    where.textContent = `Page ${at + 1}`;
  }

  async function go(index, fromBottom = false) {
    for (const c of [top, bottom]) c.prev.disabled = c.forward.disabled = true;
    status.replaceChildren(loading());
    try {
      const page = await fetchPage(cursors[index]);
      at = index;
      next = page.nextCursor || "";
      cursors.length = at + 1;
      if (next) cursors.push(next);
      loaded = true;
      status.replaceChildren();
      list.replaceChildren();
      if (page.items.length) list.append(renderItems(page.items));
      else status.replaceChildren(empty(at ? "No more entries." : emptyText || "Nothing here yet."));
      if (fromBottom) top.nav.scrollIntoView({ block: "nearest" });
    } catch (error) {
      if (!aborted(error)) status.replaceChildren(errorBox(error));
    }
    show();
  }
  go(0);
  return box;
}

// A list's pages (every list: `cursor`/`limit` → `items` + `nextCursor`), with "Load more".
export function pager(fetchPage, renderItems, { emptyText } = {}) {
  const list = h("div", { class: "pager-items" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const status = h("div");
  const box = h("div", { class: "pager" }, list, status, more);
  let token = "";
  let count = 0;
  async function next() {
    status.replaceChildren(loading());
    more.hidden = true;
    try {
      const page = await fetchPage(token);
      status.replaceChildren();
      count += page.items.length;
      if (page.items.length) list.append(renderItems(page.items));
      if (!count) status.replaceChildren(empty(emptyText || "Nothing here yet."));
      token = page.nextCursor || "";
      more.hidden = !token;
    } catch (error) {
      if (!aborted(error)) status.replaceChildren(errorBox(error));
    }
  }
  more.addEventListener("click", next);
  next();
  return box;
}
