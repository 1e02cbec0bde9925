// Personas: the list (searched and sorted by the server, by state),
// creation (with a cost preview) with the pipeline's steps streamed live,
// and one persona's page: soul, voice, versions, portraits with their edit
// chains, the lineage graph, audit and the lifecycle actions.

import { choices, del, get, post, stream } from "./api.js";
import { lineageGraph } from "./lineage.js";
import { badge, busy, confirmDialog, empty, errorBox, field, h, load, loading, replace, select, table, when } from "./ui.js";
import { previewBox, versionsSection } from "./versions.js";

const path = (id, rest = "") => `/v1/personas/${encodeURIComponent(id)}${rest}`;
const nameOf = (p) => p.displayName || (p.soul && p.soul.name) || p.slug;

export function render(main, params, context) {
  if (params[0] === "new") return createView(main, context);
  if (params[0]) return detailView(main, params[0], context);
  return listView(main);
}

function listView(main) {
  const search = h("input", { type: "search", name: "q", placeholder: "Name, slug or intent", maxlength: "200" });
  const state = h("select", { name: "state" }, h("option", { value: "" }, "any state"));
  const order = h("select", { name: "orderBy" }, h("option", { value: "" }, "newest first"));
  const deleted = h("input", { type: "checkbox", id: "show-deleted" });
  const results = h("div", { "aria-live": "polite" });
  let loaded = [];
  let token = "";
  const more = h("button", { type: "button", hidden: true }, "Load more");

  main.append(
    h("div", { class: "row between" }, h("h1", {}, "Personas"), h("a", { class: "button primary", href: "#/personas/new" }, "New persona")),
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      field("Search", search), field("State", state), field("Sort", order),
      h("div", { class: "field inline" }, deleted, h("label", { for: "show-deleted" }, "Show deleted"))),
    results, more);

  choices("get", "/v1/personas", "state").then((states) => state.append(...states.map((v) => h("option", { value: v }, v)))).catch(() => {});
  // The sort orders the contract lists, each field once per direction.
  choices("get", "/v1/personas", "orderBy").then((orders) => order.append(...orders.filter((v) => v.includes(" "))
    .map((v) => h("option", { value: v }, v.replace("_at", "").replace("display_name", "name").replace(" asc", " ↑").replace(" desc", " ↓"))))).catch(() => {});

  function show() {
    const shown = loaded;
    if (!shown.length) {
      const searched = search.value.trim();
      replace(results, empty(searched ? "No persona matches the search." : "No personas yet.",
        searched ? null : h("a", { class: "button", href: "#/personas/new" }, "Create one")));
      return;
    }
    replace(results, table([
      ["Name", (p) => h("a", { href: `#/personas/${p.id}` }, nameOf(p))],
      ["Slug", (p) => h("code", {}, p.slug)],
      ["State", (p) => badge(p.state)],
      ["Version", (p) => `v${p.version}`],
      ["Audit", (p) => (p.auditScore === undefined ? "—" : Number(p.auditScore).toFixed(2))],
      ["Created", (p) => when(p.createdAt)],
    ], shown, { caption: "Personas" }));
  }

  async function fetchPage(reset) {
    if (reset) {
      loaded = [];
      token = "";
      replace(results, loading("Loading personas"));
    }
    more.hidden = true;
    try {
      const page = await get("/v1/personas", { limit: 100, cursor: token, state: state.value, showDeleted: deleted.checked,
        q: search.value.trim(), orderBy: order.value });
      loaded = loaded.concat(page.items || []);
      token = page.nextCursor || "";
      more.hidden = !token;
      show();
    } catch (error) {
      replace(results, errorBox(error));
    }
  }
  // The server searches (every page, not the loaded one): a new query after a pause in typing.
  let typing = 0;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(() => fetchPage(true), 250); });
  order.addEventListener("change", () => fetchPage(true));
  state.addEventListener("change", () => fetchPage(true));
  deleted.addEventListener("change", () => fetchPage(true));
  more.addEventListener("click", () => fetchPage(false));
  fetchPage(true);
}

const STEP_LABELS = { moderate_intent: "Moderate the intent", draft_soul: "Draft the soul", write_voice: "Write the voice", audit: "Audit", fingerprint: "Fingerprint the voice" };

function createView(main) {
  const controller = new AbortController();
  const intent = h("textarea", { name: "intent", rows: "3", required: true, minlength: "3", maxlength: "2000", placeholder: "A patient gardener who names every snail" });
  const displayName = h("input", { name: "displayName", maxlength: "200" });
  const slug = h("input", { name: "slug", pattern: "[a-z0-9]+(-[a-z0-9]+)*", maxlength: "64" });
  const visibility = h("select", { name: "visibility" });
  choices("post", "/v1/personas", "visibility").then((values) => visibility.append(...values.map((v) => h("option", { value: v }, v)))).catch(() => {});
  const steps = h("ol", { class: "steps", "aria-live": "polite", "aria-label": "Generation steps" });
  const out = h("div");
  const submit = h("button", { type: "submit", class: "primary" }, "Generate");
  const previewButton = h("button", { type: "button" }, "Preview cost");
  const form = h("form", { class: "panel" },
    field("Intent", intent, "What the persona should be, in your words (3–2000 characters)."),
    h("div", { class: "grid" }, field("Display name (optional)", displayName), field("Slug (optional)", slug), field("Visibility", visibility)),
    h("div", { class: "row" }, submit, previewButton));
  main.append(h("h1", {}, "New persona"), form, h("section", { "aria-label": "Progress" }, steps, out));

  const requestBody = () => {
    const body = { intent: intent.value.trim() };
    if (displayName.value.trim()) body.displayName = displayName.value.trim();
    if (slug.value.trim()) body.slug = slug.value.trim();
    if (visibility.value) body.visibility = visibility.value;
    return body;
  };
  previewButton.addEventListener("click", () => {
    if (!form.reportValidity()) return;
    busy(previewButton, out, async () => replace(out, await previewBox(requestBody())));
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    steps.replaceChildren();
    const items = {};
    const body = requestBody();
    busy(submit, out, async () => {
      // One run, one id: the stream's (X-Run-Id, which `end` names too), the one a resume or support asks for.
      const ended = await stream("/v1/personas", body, (name, data, run) => {
        if (name === "run.started") {
          steps.append(h("li", { class: "step done", dataset: { step: "run" } }, "Run ", h("code", { class: "run-id" }, run.runId), " started"));
        } else if (name === "step.started") {
          items[data.step] = h("li", { class: "step running", dataset: { step: data.step } }, h("span", {}, STEP_LABELS[data.step] || data.step), h("span", { class: "muted" }, " running…"));
          steps.append(items[data.step]);
        } else if (name === "step.completed") {
          const item = items[data.step] || steps.appendChild(h("li"));
          item.className = "step done";
          replace(item, h("span", {}, STEP_LABELS[data.step] || data.step), h("span", { class: "muted" }, ` done in ${data.durationMs} ms`));
        } else if (name === "persona") {
          const p = data.persona;
          out.replaceChildren(h("div", { class: "success", role: "status" },
            h("p", {}, "Created ", h("strong", {}, nameOf(p)), ` (${p.slug}, v${p.version}).`),
            h("div", { class: "row" }, h("a", { class: "button primary", href: `#/personas/${p.id}` }, "Open persona"),
              h("a", { class: "button", href: `#/playground/${p.id}` }, "Chat with it"))));
        }
      }, { signal: controller.signal });
      steps.append(h("li", { class: "step done", dataset: { step: "end" } }, `Run ${ended.status}`));
    });
  });
  return () => controller.abort();
}

function section(title, ...children) {
  const id = `s-${title.toLowerCase().replace(/\W+/g, "-")}`;
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), children);
}

function definition(pairs) {
  return h("dl", { class: "dl" }, pairs.filter(([, v]) => v !== undefined && v !== "" && !(Array.isArray(v) && !v.length))
    .map(([k, v]) => [h("dt", {}, k), h("dd", {}, Array.isArray(v) ? v.join(", ") : v)]));
}

function soulView(soul = {}) {
  return definition([["Name", soul.name], ["Desire", soul.desire], ["Fear", soul.fear], ["Backstory", soul.backstory],
    ["Traits", soul.traits], ["Values", soul.values], ["Speaking style", soul.speakingStyle]]);
}

function voiceView(voice) {
  return h("div", {},
    definition([["Greeting", voice.greeting], ["Style notes", voice.styleNotes],
      ["Fingerprint", voice.fingerprintModel ? `${voice.fingerprintModel}, ${voice.fingerprintDimensions} dimensions` : ""]]),
    h("details", {}, h("summary", {}, "System prompt"), h("pre", { class: "wrap" }, voice.systemPrompt || "")),
    (voice.sampleDialogues || []).length ? h("div", {}, h("h3", {}, "Sample dialogues"),
      voice.sampleDialogues.map((d) => h("div", { class: "dialogue" }, h("p", {}, h("strong", {}, "User: "), d.user), h("p", {}, h("strong", {}, "Persona: "), d.persona)))) : null);
}

// Portraits grouped by conversation: a generation starts one, each edit
// appends its result with the edited portrait as parent.
function portraitsView(personaId, portraits, reload) {
  const out = h("div");
  const prompt = h("input", { name: "prompt", maxlength: "1000", placeholder: "Optional prompt" });
  const style = h("select", { name: "style" }, h("option", { value: "" }, "default style"));
  choices("post", "/v1/personas/{persona_id}/portraits", "style").then((values) => style.append(...values.map((v) => h("option", { value: v }, v)))).catch(() => {});
  const generate = h("button", { type: "submit" }, "Generate portrait");
  const form = h("form", { class: "row wrap" }, field("Prompt", prompt), field("Style", style), generate);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(generate, out, async () => {
      await post(path(personaId, "/portraits"), { prompt: prompt.value.trim(), style: style.value });
      reload();
    });
  });
  const byConversation = new Map();
  for (const p of [...portraits].sort((a, b) => (a.createdAt < b.createdAt ? -1 : 1))) {
    if (!byConversation.has(p.conversationId)) byConversation.set(p.conversationId, []);
    byConversation.get(p.conversationId).push(p);
  }
  const chains = [...byConversation.values()].map((chain) => h("div", { class: "chain" },
    h("h3", { class: "small" }, `Conversation ${chain[0].conversationId.slice(0, 8)} · ${chain.length} image${chain.length > 1 ? "s" : ""}`),
    h("ol", { class: "gallery" }, chain.map((p) => portraitCard(personaId, p, chain, reload)))));
  return h("div", {}, form, out, chains.length ? chains : empty("No portraits yet."));
}

function portraitCard(personaId, p, chain, reload) {
  const out = h("div");
  const parentIndex = chain.findIndex((c) => c.id === p.parentPortraitId);
  const caption = p.instruction ? `Edit${parentIndex >= 0 ? ` of #${parentIndex + 1}` : ""}: “${p.instruction}”` : `Generated${p.style ? ` (${p.style})` : ""}${p.prompt ? `: “${p.prompt}”` : ""}`;
  const actions = h("div", { class: "row wrap" });
  const act = (label, suffix) => {
    const button = h("button", { type: "button", class: "small" }, label);
    button.addEventListener("click", () => busy(button, out, async () => { await post(path(personaId, `/portraits/${p.id}:${suffix}`)); reload(); }));
    return button;
  };
  if (p.status === "generated") actions.append(act("Approve", "approve"), act("Reject", "reject"));
  if (p.status === "generated" || p.status === "approved") {
    const instruction = h("input", { name: "instruction", maxlength: "500", required: true, placeholder: "e.g. add glasses" });
    const edit = h("button", { type: "submit", class: "small" }, "Edit");
    const form = h("form", { class: "row" }, field("Edit instruction", instruction), edit);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(edit, out, async () => {
        await post(`/v1/personas/${encodeURIComponent(personaId)}/portrait/${encodeURIComponent(p.id)}/edit`, { instruction: instruction.value.trim() });
        reload();
      });
    });
    actions.append(form);
  }
  return h("li", { class: "portrait" },
    h("figure", {},
      p.signedUrl ? h("img", { src: p.signedUrl, alt: caption, width: "160", height: "160", loading: "lazy" }) : h("div", { class: "placeholder" }, p.status),
      h("figcaption", {}, h("span", {}, `#${chain.indexOf(p) + 1} `), badge(p.status), p.canonical ? badge("canonical", "active") : null, h("br"), caption)),
    actions, out);
}

function actionForm(label, help, fields, run) {
  const out = h("div");
  const submit = h("button", { type: "submit" }, label);
  const form = h("form", { class: "action-form", "aria-label": label }, h("h3", {}, label), h("p", { class: "muted" }, help),
    fields.map(([name, control]) => field(name, control)), submit, out);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, out, run);
  });
  return form;
}

function detailView(main, id, context) {
  const header = h("div", {}, loading("Loading persona"));
  const actions = h("div", { class: "row wrap actions" });
  const actionOut = h("div", { "aria-live": "polite" });
  const body = h("div", { class: "detail" });
  main.append(h("p", {}, h("a", { href: "#/personas" }, "← Personas")), header, actions, actionOut, body);

  async function reload() {
    try {
      const persona = await get(path(id));
      show(persona);
    } catch (error) {
      replace(header, errorBox(error));
    }
  }

  function show(p) {
    replace(header, h("h1", {}, nameOf(p), " ", badge(p.state)),
      h("p", { class: "muted" }, `${p.slug} · v${p.version} · ${p.visibility} · `, h("code", {}, p.id)),
      h("p", {}, h("strong", {}, "Intent: "), p.intent),
      p.flaggedReason ? h("p", { class: "warning" }, `Flagged: ${p.flaggedReason}`) : null,
      p.purgeAt ? h("p", { class: "warning" }, "Deleted; purged for good at ", when(p.purgeAt), " unless restored.") : null);
    const writable = p.state === "active" || p.state === "flagged";
    const button = (label, run, { danger = false, confirm = "" } = {}) => {
      const b = h("button", { type: "button", class: danger ? "danger" : "" }, label);
      b.addEventListener("click", async () => {
        if (confirm && !(await confirmDialog(confirm, label))) return;
        busy(b, actionOut, run);
      });
      return b;
    };
    replace(actions,
      p.state !== "deleted" ? h("a", { class: "button primary", href: `#/playground/${p.id}` }, "Chat") : null,
      writable ? button("Audit", async () => {
        try {
          const result = await post(path(p.id, "/audit"));
          show(result.persona);
          showAudit(result);
        } catch (error) {
          if (error.code === "audit_blocked" && error.details.persona) show(error.details.persona);
          throw error;
        }
      }) : null,
      p.state !== "archived" && p.state !== "deleted" ? button("Archive", async () => show(await post(path(p.id, "/archive"))), { confirm: "Archive this persona? It becomes read-only." }) : null,
      writable ? button("Delete", async () => show(await del(path(p.id))), { danger: true, confirm: "Delete this persona? It can be restored for 30 days." }) : null,
      p.state === "deleted" ? button("Restore", async () => show(await post(path(p.id, "/restore")))) : null);
    replace(actionOut);
    renderBody(p, writable);
  }

  function showAudit(result) {
    replace(actionOut, h("div", { class: result.passed ? "success" : "warning", role: "status" },
      h("p", {}, h("strong", {}, result.passed ? "Audit passed" : "Audit failed"),
        ` · score ${Number(result.score).toFixed(2)} (threshold ${Number(result.threshold).toFixed(2)}) · provocation ${result.provocationPassed ? "resisted" : "not resisted"}`),
      result.notes ? h("p", {}, result.notes) : null));
  }

  function renderBody(p, writable) {
    const voice = h("div", {}, loading("Loading voice"));
    const portraits = h("div", {}, loading("Loading portraits"));
    const lineage = h("div", {}, loading("Loading lineage"));
    const instruction = h("textarea", { rows: "2", required: true, maxlength: "2000" });
    const note = h("input", { maxlength: "500" });
    const forkInstruction = h("textarea", { rows: "2", maxlength: "2000" });
    const forkSlug = h("input", { pattern: "[a-z0-9]+(-[a-z0-9]+)*" });
    const forkNote = h("input", { maxlength: "500" });
    const fromStep = select([]);
    choices("post", "/v1/personas/{id}/regenerate", "fromStep").then((v) => fromStep.append(...v.map((x) => h("option", { value: x }, x)))).catch(() => {});
    replace(body,
      section("Soul", soulView(p.soul)),
      section("Voice", voice),
      section("Versions", versionsSection(p, writable, show)),
      section("Portraits", portraits),
      section("Lineage", lineage),
      section("Audit", h("p", {}, p.auditScore === undefined ? "Not audited yet." : `Latest audit score: ${Number(p.auditScore).toFixed(2)}.`),
        h("p", { class: "muted" }, "Run an audit with the Audit button above; a score under the workspace threshold flags the persona while blocking applies.")),
      section("Refine, fork, regenerate",
        writable ? actionForm("Refine", "A new version through the pipeline, with your instruction applied to the soul.", [["Instruction", instruction], ["Note (lineage)", note]], async () => {
          const next = await post(path(p.id, "/refine"), { instruction: instruction.value.trim(), note: note.value.trim() });
          show(next);
        }) : h("p", { class: "muted" }, "Archived and deleted personas cannot be refined."),
        p.state !== "deleted" ? actionForm("Fork", "A new persona from this one, its child in the lineage.", [["How the fork differs (optional)", forkInstruction], ["Slug of the fork (optional)", forkSlug], ["Note (lineage)", forkNote]], async () => {
          const body2 = { instruction: forkInstruction.value.trim(), note: forkNote.value.trim() };
          if (forkSlug.value.trim()) body2.slug = forkSlug.value.trim();
          const fork = await post(path(p.id, "/fork"), body2);
          context.navigate(`#/personas/${fork.id}`);
        }) : null,
        writable ? actionForm("Regenerate", "Re-run the pipeline from a step, keeping the earlier steps' outputs.", [["From step", fromStep]], async () => show(await post(path(p.id, "/regenerate"), { fromStep: fromStep.value }))) : null),
      h("p", {}, h("a", { href: `#/events/${p.id}` }, "Events of this persona →")));
    load(voice, "Loading voice", () => get(path(p.id, "/voice")), voiceView);
    const reloadPortraits = () => load(portraits, "Loading portraits", () => get(path(p.id, "/portraits"), { limit: 100 }), (r) => portraitsView(p.id, r.items || [], reloadPortraits));
    reloadPortraits();
    load(lineage, "Loading lineage", () => get(path(p.id, "/lineage")), (l) => lineageGraph(l, p.id));
  }

  reload();
}
