// Playground: chat with a persona, the reply streamed as it is produced,
// the session's token and cost counters, and drift warnings (a reply's drift
// score over the persona's threshold, an auto-recovered reply, a blocked one).
// Chat controls: regenerate the last reply and move between its alternatives,
// edit or delete a message (the later ones go), a reply's temperature and
// maximum tokens, and a cost preview of the message before it is sent.

import { del, get, patch, post, stream } from "./api.js";
import { badge, busy, confirmDialog, empty, errorBox, field, h, loading, replace, when, cost } from "./ui.js";

const DRIFT_KEY = "engine.pipeline.drift_detection.threshold";

export function render(main, params, context) {
  const [personaId, sessionId] = params;
  main.append(h("h1", {}, "Playground"));
  if (!personaId) return pickPersona(main);
  return chatView(main, personaId, sessionId, context);
}

function pickPersona(main) {
  const box = h("div", {}, loading("Loading personas"));
  main.append(h("p", { class: "muted" }, "Pick a persona to chat with."), box);
  get("/v1/personas", { limit: 100 }).then((page) => {
    const personas = (page.items || []).filter((p) => p.state !== "deleted");
    if (!personas.length) {
      replace(box, empty("No personas yet.", h("a", { class: "button", href: "#/personas/new" }, "Create one")));
      return;
    }
    replace(box, h("ul", { class: "cards" }, personas.map((p) => h("li", {},
      h("a", { class: "card", href: `#/playground/${p.id}` }, h("strong", {}, p.displayName || p.slug), h("span", { class: "muted" }, ` ${p.slug} · `), badge(p.state))))));
  }).catch((error) => replace(box, errorBox(error)));
}

function counters(session) {
  return [
    ["Messages", session.messageCount],
    ["Input tokens", session.inputTokens],
    ["Output tokens", session.outputTokens],
    ["Cost", cost(session.costUsdMicros, session.unpricedReplies)],
  ];
}

function chatView(main, personaId, sessionId, context) {
  const controller = new AbortController();
  const head = h("div", {}, loading("Loading persona"));
  const sessions = h("div", { class: "sessions" });
  const chat = h("div", { class: "chat" });
  main.append(h("p", {}, h("a", { href: "#/playground" }, "← All personas")), head, h("div", { class: "chat-layout" }, sessions, chat));
  let threshold = null;

  get(`/v1/personas/${encodeURIComponent(personaId)}`).then((p) => replace(head,
    h("p", {}, "Chatting with ", h("a", { href: `#/personas/${p.id}` }, h("strong", {}, p.displayName || p.slug)), " ", badge(p.state))))
    .catch((error) => replace(head, errorBox(error)));
  get(`/v1/config/${DRIFT_KEY}`, { personaId }).then((item) => { threshold = Number(item.value); }).catch(() => {});

  const start = h("button", { type: "button", class: "primary" }, "New session");
  const started = h("div");
  start.addEventListener("click", () => busy(start, started, async () => {
    const made = await post("/v1/chat/sessions", { personaId, title: `Playground ${new Date().toLocaleString()}` });
    context.navigate(`#/playground/${personaId}/${made.sessionId}`);
  }));
  let listed = [];

  function showSessions() {
    replace(sessions, h("h2", { class: "small" }, "Sessions"), start, started,
      listed.length ? h("ul", { class: "session-list" }, listed.map((s) => h("li", { dataset: { session: s.sessionId } },
        h("a", { href: `#/playground/${personaId}/${s.sessionId}`, "aria-current": s.sessionId === sessionId ? "page" : null },
          s.title || s.sessionId), " ", badge(s.status), h("br"), h("small", { class: "muted" }, `${s.messageCount} messages · `, when(s.lastActiveAt))))) : empty("No sessions yet."));
  }

  // A reply's `message.completed` carries its session as stored: the list shows that, with no
  // second read that could run ahead of the commit and show the exchange before.
  function updateSession(session) {
    listed = [session, ...listed.filter((s) => s.sessionId !== session.sessionId)];
    showSessions();
  }

  replace(sessions, h("h2", { class: "small" }, "Sessions"), loading());
  get("/v1/chat/sessions", { personaId, limit: 20 }).then((page) => {
    listed = page.items || [];
    showSessions();
  }).catch((error) => replace(sessions, start, started, errorBox(error)));

  if (!sessionId) {
    replace(chat, empty("Start a new session or open one."));
    return () => controller.abort();
  }

  const transcript = h("ol", { class: "transcript", "aria-live": "polite", "aria-label": "Conversation" });
  const stats = h("dl", { class: "counters", "aria-label": "Session counters" });
  const input = h("textarea", { name: "message", rows: "2", required: true, maxlength: "32000", placeholder: "Say something…" });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const temperature = h("input", { type: "number", name: "temperature", min: "0", max: "2", step: "0.1", placeholder: "default" });
  const maxTokens = h("input", { type: "number", name: "maxTokens", min: "1", max: "8192", step: "1", placeholder: "default" });
  const previewButton = h("button", { type: "button" }, "Preview cost");
  const estimate = h("div", { class: "preview", "aria-live": "polite" });
  const out = h("div");
  const form = h("form", { class: "composer" }, field("Message", input),
    h("div", { class: "row" }, field("Temperature", temperature, "0 to 2"), field("Max tokens", maxTokens, "1 to 8192")),
    h("div", { class: "row" }, send, previewButton), estimate, out);
  const status = h("div");
  replace(chat, status, stats, transcript, form);

  function showCounters(session) {
    replace(stats, counters(session).map(([k, v]) => h("div", { class: "counter" }, h("dt", {}, k), h("dd", { dataset: { counter: k } }, String(v)))));
    replace(status, session.status !== "active" ? h("p", { class: "warning" }, `This session is ${session.status}: read-only.`) : null);
    form.hidden = session.status !== "active";
  }

  function driftNote(reply) {
    if (reply.recovered) return h("p", { class: "warning drift" }, "Drift detected: this reply was regenerated in the persona's voice (auto-recover).");
    if (threshold !== null && reply.driftScore > threshold) {
      return h("p", { class: "warning drift" }, `Drift warning: score ${reply.driftScore.toFixed(2)} is over the threshold ${threshold.toFixed(2)}.`);
    }
    return null;
  }

  function bubble(message, text = message.content) {
    const content = h("div", { class: "content" }, text);
    const meta = h("div", { class: "meta" });
    const item = h("li", { class: `msg ${message.role}`, dataset: message.id ? { message: message.id } : {} },
      h("span", { class: "sr-only" }, message.role === "user" ? "You: " : "Persona: "), content, meta);
    if (message.role === "assistant" && message.usage) fillMeta(meta, message);
    return { item, content, meta };
  }

  // Sampling settings of the composer: only what is filled in.
  function sampling() {
    const settings = {};
    if (temperature.value !== "") settings.temperature = Number(temperature.value);
    if (maxTokens.value !== "") settings.maxTokens = Number(maxTokens.value);
    return settings;
  }

  const base = `/v1/chat/sessions/${encodeURIComponent(sessionId)}`;
  const messagePath = (message, action = "") => `${base}/messages/${encodeURIComponent(message.id)}${action}`;

  // A stored message with its controls: edit and delete (the later messages go), and for
  // the last one regenerate and its alternatives.
  function controlled(message, last, active) {
    const shown = bubble(message);
    if (!active) return shown.item;
    const note = h("div");
    const act = (button, work) => button.addEventListener("click", () => busy(button, note, work));
    const edit = h("button", { type: "button", class: "small" }, "Edit");
    const remove = h("button", { type: "button", class: "small" }, "Delete");
    const actions = h("div", { class: "row actions", role: "group", "aria-label": "Actions" }, edit, remove);
    if (last && message.swipeCount > 1) {
      const previous = h("button", { type: "button", class: "small", "aria-label": "Previous alternative", disabled: message.swipeIndex === 0 }, "‹");
      const next = h("button", { type: "button", class: "small", "aria-label": "Next alternative", disabled: message.swipeIndex + 1 >= message.swipeCount }, "›");
      act(previous, async () => { await post(messagePath(message, "/choose"), { swipeIndex: message.swipeIndex - 1 }); await reload(); });
      act(next, async () => { await post(messagePath(message, "/choose"), { swipeIndex: message.swipeIndex + 1 }); await reload(); });
      actions.prepend(previous, h("span", { class: "swipes", "aria-label": "Alternative" }, `${message.swipeIndex + 1}/${message.swipeCount}`), next);
    }
    if (last) {
      const again = h("button", { type: "button", class: "small" }, message.role === "assistant" ? "Regenerate" : "Reply");
      act(again, async () => { await post(messagePath(message, "/regenerate"), sampling()); await reload(); });
      actions.append(again);
    }
    act(remove, async () => {
      if (!(await confirmDialog("Delete this message and every later one?", "Delete"))) return;
      await del(messagePath(message));
      await reload();
    });
    edit.addEventListener("click", () => {
      const text = h("textarea", { name: "edit", rows: "3", maxlength: "32000" });
      text.value = message.content;
      const save = h("button", { type: "button", class: "primary small" }, "Save");
      const cancel = h("button", { type: "button", class: "small" }, "Cancel");
      cancel.addEventListener("click", () => reload());
      act(save, async () => { await patch(messagePath(message), { content: text.value }); await reload(); });
      replace(shown.content, field("Edited text", text, "Saving removes every later message."), h("div", { class: "row" }, save, cancel));
    });
    if (message.edited) shown.meta.append(h("small", { class: "muted" }, " · edited"));
    shown.meta.append(actions, note);
    return shown.item;
  }

  async function reload() {
    const [session, page] = await Promise.all([get(base), get(`${base}/messages`, { limit: 100 })]);
    const items = page.items || [];
    showCounters(session);
    updateSession(session);
    replace(transcript, items.map((m, i) => controlled(m, i === items.length - 1, session.status === "active")));
  }

  previewButton.addEventListener("click", () => busy(previewButton, estimate, async () => {
    const content = input.value.trim();
    if (!content) return replace(estimate, h("p", { class: "muted" }, "Write a message to preview it."));
    const p = await post(`${base}/messages/preview`, { content, ...sampling() });
    const cap = (p.quota || []).find((q) => q.name === "chat.messages");
    replace(estimate, h("p", { class: "muted", dataset: { preview: "" } },
      `Estimate: ${p.inputTokens} in · ${p.outputTokens} out · ${cost(p.costUsdMicros, p.unpriced)} on ${p.model}`,
      cap ? ` · uses ${cap.units} of ${cap.limit} messages per ${cap.windowSeconds} s` : "", ". Nothing is spent."));
  }));

  function fillMeta(meta, reply) {
    const usage = reply.usage || {};
    replace(meta, h("small", { class: "muted" },
      `${usage.inputTokens || 0} in · ${usage.outputTokens || 0} out · ${cost(usage.costUsdMicros, usage.unpriced)} · drift ${Number(reply.driftScore || 0).toFixed(2)}`),
    driftNote(reply));
  }

  reload().catch((error) => replace(status, errorBox(error)));

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content) return;
    transcript.append(bubble({ role: "user", content }).item);
    const reply = bubble({ role: "assistant", content: "" }, "");
    reply.item.classList.add("streaming");
    reply.item.setAttribute("aria-busy", "true");
    transcript.append(reply.item);
    input.value = "";
    let text = "";
    busy(send, out, async () => {
      try {
        await stream(`${base}/messages`, { content, ...sampling() }, (name, data) => {
          if (name === "message.delta") {
            text += data.delta;
            reply.content.textContent = text;
          } else if (name === "message.completed") {
            reply.content.textContent = data.reply.content;
            fillMeta(reply.meta, data.reply);
            showCounters(data.session);
            updateSession(data.session);
          }
        }, { signal: controller.signal });
        replace(estimate);
        await reload(); // the stored messages, with their controls
      } catch (error) {
        // Text already released stays visible, marked as not kept: the reply is neither stored nor billed.
        reply.meta.replaceChildren(error.code === "drift_blocked"
          ? h("p", { class: "warning drift" }, "Drift blocked: the reply strayed from the persona's voice, so it was stopped; it is not stored or billed.")
          : h("p", { class: "muted" }, "This reply failed; it is not stored."));
        reply.item.classList.add("failed");
        throw error;
      } finally {
        reply.item.classList.remove("streaming");
        reply.item.removeAttribute("aria-busy");
      }
    });
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  return () => controller.abort();
}
