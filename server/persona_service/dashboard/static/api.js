// The public /v1 API of this origin, as the dashboard calls it: through the
// TypeScript SDK's build (static/sdk/, scripts/gen_dashboard_sdk.py), so the
// console and SDK users share one client: the bearer credential the user
// pasted, an Idempotency-Key on every write (the same on its retries), the
// retry policy, typed errors (the envelope's code, message and details and the
// x-request-id), and server-sent events read with fetch (EventSource cannot
// send an Authorization header), resumed with Last-Event-ID after a drop.
// What is left here: the credential's storage and the rate-limit headers of
// the latest answer (Usage page).

import { APIUserAbortError, PersonaClient, PersonaError } from "./sdk/index.js";

const STORE = "persona.dashboard.credential";

// sessionStorage: the credential lives as long as the tab, never in a cookie.
export const session = {
  token: sessionStorage.getItem(STORE) || "",
  identity: null, // {orgId, workspaceId, userId, kind, org, subscription}
};

export function remember(token) {
  session.token = token;
  sessionStorage.setItem(STORE, token);
  client = null;
}

export function forget() {
  session.token = "";
  session.identity = null;
  sessionStorage.removeItem(STORE);
  client = null;
}

// An API error (PersonaError: status, code, message, details, requestId).
export { PersonaError as ApiError };

// A call the user left (navigated away: its AbortSignal) rather than one that failed.
export const aborted = (error) => error instanceof APIUserAbortError || (error && error.name === "AbortError");

// The rate-limit headers of the latest answer that carried them (Usage page).
export const limits = { seen: null };

function noteLimits(response) {
  const limit = response.headers.get("x-ratelimit-limit");
  if (limit === null) return;
  limits.seen = {
    limit: Number(limit),
    remaining: Number(response.headers.get("x-ratelimit-remaining")),
    reset: Number(response.headers.get("x-ratelimit-reset")),
    windowSeconds: Number(response.headers.get("x-service-plan-window-seconds") || 60),
    policy: response.headers.get("ratelimit-policy") || "",
    at: Date.now(),
  };
}

// The SDK's client for the pasted credential, on this origin; every answer passes noteLimits.
let client = null;

function sdk() {
  client ??= new PersonaClient({
    apiKey: session.token,
    baseUrl: location.origin,
    fetch: async (url, init) => {
      const response = await fetch(url, { ...init, cache: "no-store" });
      noteLimits(response);
      return response;
    },
  });
  return client;
}

// The form's filters as query parameters: empty ones (and unticked boxes) are left out.
function compact(query = {}) {
  return Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== "" && v !== false));
}

// A JSON operation of a concrete path (ids already encoded): its parsed answer.
export function call(method, path, { query, body, headers, signal } = {}) {
  return sdk().request(method, path, { query: compact(query), body, options: { headers, signal } });
}

export const get = (path, query, options = {}) => call("GET", path, { ...options, query });
export const post = (path, body = {}, options = {}) => call("POST", path, { ...options, body });
export const patch = (path, body = {}, options = {}) => call("PATCH", path, { ...options, body });
export const del = (path, options = {}) => call("DELETE", path, options);

// Where a redirecting GET (an invoice PDF: 307 to a short-lived signed URL)
// leads: a HEAD follows the redirect with the credential and fetches no body.
export async function resolveRedirect(path) {
  return (await sdk().raw("HEAD", path)).url;
}

// POST `path?stream=true` and call onEvent(name, data, stream) for each event
// until the run's `end`: the SDK's event stream, which resumes a dropped
// connection with Last-Event-ID and throws an in-band `error` event as its
// typed error. Answers the run's id (X-Run-Id, the one `end` names), status
// and request id.
export async function stream(path, body, onEvent, { signal } = {}) {
  const events = sdk().stream("frames", "POST", path, { query: { stream: "true" }, body, options: { signal } });
  for await (const frame of events) {
    if (frame.data) onEvent(frame.event, JSON.parse(frame.data), events);
  }
  return { runId: events.runId, status: events.status, requestId: events.requestId };
}

// The published OpenAPI document: the lists the forms offer (scopes, event
// types, plans, states) come from the contract, not from copies here.
let contract = null;

export async function openapi() {
  if (!contract) {
    contract = sdk().request("GET", "/v1/openapi.json", { auth: false });
    contract.catch(() => { contract = null; });
  }
  return contract;
}

// The allowed values of a query parameter or body field (an array's items).
export async function choices(method, path, name) {
  const document = await openapi();
  const operation = document.paths[path][method];
  const resolve = (schema) => (schema && schema.$ref ? document.components.schemas[schema.$ref.split("/").pop()] : schema);
  const parameter = (operation.parameters || []).find((p) => p.name === name);
  let schema = parameter && parameter.schema;
  if (!schema) {
    const body = resolve(operation.requestBody.content["application/json"].schema);
    schema = body.properties[name];
  }
  schema = resolve(schema);
  if (schema.type === "array") schema = resolve(schema.items);
  return schema.enum || [];
}
