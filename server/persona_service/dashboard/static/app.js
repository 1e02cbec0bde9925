// The console's shell: sign-in, navigation and the hash router (`#/keys`,
// `#/personas/<id>`, …). Each page module renders into <main> and may
// return a cleanup (an aborted stream) run when the user navigates away.

import { ApiError, forget, get, remember, session } from "./api.js";
import { errorBox, field, h, replace } from "./ui.js";
import * as audit from "./audit.js";
import * as billing from "./billing.js";
import * as events from "./events.js";
import * as keys from "./keys.js";
import * as personas from "./personas.js";
import * as playground from "./playground.js";
import * as usage from "./usage.js";
import * as webhooks from "./webhooks.js";

const PAGES = [
  ["personas", "Personas", personas],
  ["playground", "Playground", playground],
  ["keys", "API keys", keys],
  ["webhooks", "Webhooks", webhooks],
  ["usage", "Usage", usage],
  ["billing", "Billing", billing],
  ["audit", "Audit log", audit],
  ["events", "Events", events],
];

const root = document.getElementById("app");
let cleanup = null;

// A session JWT names its organization, workspace and user; an API key does
// not, so the subscription (config:read) tells its organization.
function claims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    return JSON.parse(atob(parts[1].replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    return null;
  }
}

async function identify() {
  const jwt = claims(session.token);
  const identity = { kind: jwt ? "session" : "api key", orgId: jwt ? jwt.org : "", workspaceId: jwt ? jwt.ws : "", userId: jwt ? jwt.sub : "" };
  try {
    identity.subscription = await get("/v1/billing/subscription");
    identity.orgId = identity.subscription.orgId;
  } catch (error) {
    // 403: a valid credential without config:read (or not the right role).
    if (!(error instanceof ApiError) || error.status !== 403) throw error;
  }
  if (identity.orgId) identity.org = await get(`/v1/orgs/${encodeURIComponent(identity.orgId)}`);
  session.identity = identity;
  return identity;
}

function signOut() {
  forget();
  location.hash = "#/";
  signInView();
}

function signInView(error) {
  if (cleanup) cleanup();
  cleanup = null;
  const input = h("input", { type: "password", name: "credential", autocomplete: "off", spellcheck: "false", required: true });
  const out = h("div", { "aria-live": "polite" }, error ? errorBox(error) : null);
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h("form", { class: "panel signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Persona Service"),
    h("p", { class: "muted" }, "Paste an API key (sk_live_…, sk_test_…) or a session JWT. It stays in this tab only (sessionStorage) and is sent as a bearer credential to the /v1 API."),
    field("API key or session JWT", input), button, out);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    out.replaceChildren();
    remember(input.value.trim());
    try {
      await identify();
      // replaceState: no hashchange, so the first page renders once.
      if (!location.hash.startsWith("#/") || location.hash === "#/") history.replaceState(null, "", "#/personas");
      shell();
    } catch (failure) {
      forget();
      out.replaceChildren(errorBox(failure));
    } finally {
      button.disabled = false;
    }
  });
  replace(root, h("main", { id: "main", class: "center" }, form));
  root.removeAttribute("aria-busy");
  input.focus();
}

let main = null;
let nav = null;

function shell() {
  const identity = session.identity;
  const menu = h("button", { type: "button", class: "menu", "aria-expanded": "false", "aria-controls": "nav" }, "Menu");
  nav = h("nav", { id: "nav", "aria-label": "Main" }, h("ul", {}, PAGES.map(([path, label]) => h("li", {}, h("a", { href: `#/${path}`, dataset: { page: path } }, label)))));
  menu.addEventListener("click", () => {
    const open = menu.getAttribute("aria-expanded") !== "true";
    menu.setAttribute("aria-expanded", String(open));
    nav.classList.toggle("open", open);
  });
  nav.addEventListener("click", (event) => {
    if (event.target.closest("a")) {
      menu.setAttribute("aria-expanded", "false");
      nav.classList.remove("open");
    }
  });
  const org = identity.org ? `${identity.org.name} (${identity.org.slug})` : "Organization";
  const plan = identity.subscription ? identity.subscription.plan : "";
  main = h("main", { id: "main", tabindex: "-1" });
  const skip = h("a", { class: "skip", href: "#main" }, "Skip to content");
  skip.addEventListener("click", (event) => { event.preventDefault(); main.focus(); });
  replace(root,
    skip,
    h("header", { class: "top" },
      h("div", { class: "brand" }, h("span", { class: "logo", "aria-hidden": "true" }, "◆"), "Persona Service"),
      menu,
      h("div", { class: "who" }, h("span", { class: "org", title: identity.orgId }, org), plan ? h("span", { class: `badge badge-${plan}` }, plan) : null,
        h("span", { class: "muted" }, identity.kind),
        h("button", { type: "button", class: "small", onclick: signOut }, "Sign out"))),
    h("div", { class: "layout" }, nav, main));
  root.removeAttribute("aria-busy");
  route();
}

const context = {
  signOut,
  navigate: (hash) => { location.hash = hash; },
  refreshIdentity: async () => {
    await identify();
    shell();
  },
};

function route() {
  if (!session.identity || !main) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const found = PAGES.find(([path]) => path === parts[0]);
  if (!found) {
    location.replace("#/personas");
    return;
  }
  if (cleanup) cleanup();
  cleanup = null;
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === found[0]) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${found[1]} · Persona Service`;
  main.replaceChildren();
  try {
    cleanup = found[2].render(main, parts.slice(1), context) || null;
  } catch (error) {
    main.replaceChildren(errorBox(error));
  }
  const heading = main.querySelector("h1");
  (heading || main).setAttribute("tabindex", "-1");
  (heading || main).focus({ preventScroll: true });
}

window.addEventListener("hashchange", route);

async function start() {
  if (!session.token) {
    signInView();
    return;
  }
  replace(root, h("p", { class: "loading center" }, "Signing in…"));
  try {
    await identify();
    shell();
  } catch (error) {
    forget();
    signInView(error);
  }
}

start();
