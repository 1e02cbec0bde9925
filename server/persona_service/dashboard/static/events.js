// Events: the organization's event log (what webhooks deliver), filtered by
// type or persona, each with its data.

import { choices, get } from "./api.js";
import { field, h, pager, replace, when } from "./ui.js";

export function render(main, params) {
  const type = h("select", { name: "type" }, h("option", { value: "" }, "any type"));
  const persona = h("input", { name: "personaId", placeholder: "persona uuid", value: params[0] || "", autocomplete: "off" });
  const results = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "filters", role: "search", "aria-label": "Event filters" }, field("Type", type), field("Persona", persona),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Filter")));
  main.append(h("h1", {}, "Events"), form, results);
  choices("post", "/v1/webhooks", "events").then((types) => type.append(...types.filter((t) => t !== "*").map((t) => h("option", { value: t }, t)))).catch(() => {});

  function search() {
    replace(results, pager((cursor) => get("/v1/events", { type: type.value, personaId: persona.value.trim(), limit: 50, cursor }),
    (items) => h("ul", { class: "events" }, items.map((e) => h("li", { class: "event" },
      h("details", {}, h("summary", {}, h("code", {}, e.type), " · ", when(e.occurredAt), " · ", h("span", { class: "muted" }, e.id)),
        h("pre", { class: "wrap" }, JSON.stringify(e.data, null, 2)))))), { emptyText: "No events match." }));
  }
  form.addEventListener("submit", (event) => { event.preventDefault(); search(); });
  search();
}
