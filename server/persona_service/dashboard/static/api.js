// The public /v1 API of this origin, as the dashboard calls it: the bearer
// credential the user pasted, an Idempotency-Key on every write, errors as
// ApiError (the envelope's code and message and the x-request-id), the
// rate-limit headers of the latest answer, and server-sent events read with
// fetch (EventSource cannot send an Authorization header).

const STORE = "persona.dashboard.credential";

// sessionStorage: the credential lives as long as the tab, never in a cookie.
export const session = {
  token: sessionStorage.getItem(STORE) || "",
  identity: null, // {orgId, workspaceId, userId, kind, org, subscription}
};

export function remember(token) {
  session.token = token;
  sessionStorage.setItem(STORE, token);
}

export function forget() {
  session.token = "";
  session.identity = null;
  sessionStorage.removeItem(STORE);
}

export class ApiError extends Error {
  constructor(status, code, message, details = {}, requestId = "") {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
    this.requestId = requestId;
  }
}

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

// crypto.randomUUID needs a secure context; an http deployment on another
// host is not one, and getRandomValues works everywhere.
export function uuid4() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function withQuery(path, query = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "" && value !== false) params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

// The envelope `{"error": {code, message, details}}`, the portrait edit
// shape `{"error": "<code>", "message"}`, or whatever else answered.
async function errorFrom(response) {
  const requestId = response.headers.get("x-request-id") || "";
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body && body.error;
  if (error && typeof error === "object") {
    return new ApiError(response.status, error.code, error.message, error.details, requestId);
  }
  if (typeof error === "string") {
    const { error: code, message, ...details } = body;
    return new ApiError(response.status, code, message || code, details, requestId);
  }
  return new ApiError(response.status, `http_${response.status}`, `The service answered ${response.status}.`, {}, requestId);
}

function headersFor(method, extra = {}) {
  const headers = { Authorization: `Bearer ${session.token}`, Accept: "application/json", ...extra };
  if (method !== "GET" && method !== "HEAD" && !headers["Idempotency-Key"]) headers["Idempotency-Key"] = uuid4();
  return headers;
}

async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", `The service could not be reached (${error.message}).`);
  }
}

export async function call(method, path, { query, body, headers, signal } = {}) {
  const init = { method, headers: headersFor(method, headers), signal, cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await send(withQuery(path, query), init);
  noteLimits(response);
  if (!response.ok) throw await errorFrom(response);
  const type = response.headers.get("content-type") || "";
  return type.startsWith("application/json") ? response.json() : response;
}

export const get = (path, query, options = {}) => call("GET", path, { ...options, query });
export const post = (path, body = {}, options = {}) => call("POST", path, { ...options, body });
export const patch = (path, body = {}, options = {}) => call("PATCH", path, { ...options, body });
export const del = (path, options = {}) => call("DELETE", path, options);

// Where a redirecting GET (an invoice PDF: 307 to a short-lived signed URL)
// leads: a HEAD follows the redirect with the credential and fetches no body.
export async function resolveRedirect(path) {
  const response = await send(path, { method: "HEAD", headers: headersFor("HEAD"), cache: "no-store" });
  noteLimits(response);
  if (!response.ok) throw await errorFrom(response);
  return response.url;
}

// Server-sent events: `id:`, `event:` and `data:` lines, frames separated by
// a blank line; comment lines (`:`) are skipped.
async function* frames(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame = { id: "", event: "message", data: [] };
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "data") frame.data.push(text);
        else if (name === "id" || name === "event") frame[name] = text;
      }
      yield { ...frame, data: frame.data.join("\n") };
    }
  }
}

// POST `path?stream=true` and call onEvent(name, data) for each frame until
// `end`. A connection that drops mid-stream is resumed with Last-Event-ID
// (the server replays what followed, then the live rest). An in-band `error`
// event is thrown as an ApiError once the stream has ended. No
// Idempotency-Key: streams are not replayed by one; Last-Event-ID resumes.
export async function stream(path, body, onEvent, { signal } = {}) {
  let lastId = "";
  let failure = null;
  let requestId = "";
  for (let attempt = 0; ; attempt++) {
    const headers = { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream", "Content-Type": "application/json" };
    if (lastId) headers["Last-Event-ID"] = lastId;
    const response = await send(withQuery(path, { stream: "true" }), {
      method: "POST", headers, body: JSON.stringify(body), signal, cache: "no-store",
    });
    noteLimits(response);
    if (!response.ok) throw await errorFrom(response);
    requestId = response.headers.get("x-request-id") || requestId;
    try {
      for await (const frame of frames(response.body)) {
        if (frame.id) lastId = frame.id;
        const data = frame.data ? JSON.parse(frame.data) : {};
        if (frame.event === "end") {
          if (failure) throw failure;
          return { ...data, requestId };
        }
        if (frame.event === "error") {
          const e = data.error || {};
          failure = new ApiError(0, e.code || "internal_error", e.message || "The stream failed.", e.details, requestId);
        }
        onEvent(frame.event, data);
      }
    } catch (error) {
      if (error.name === "AbortError" || error instanceof ApiError) throw error;
    }
    if (!lastId || attempt >= 3) {
      throw new ApiError(0, "stream_interrupted", "The stream ended before it finished.", {}, requestId);
    }
    await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
  }
}

// The published OpenAPI document: the lists the forms offer (scopes, event
// types, plans, states) come from the contract, not from copies here.
let contract = null;

export async function openapi() {
  if (!contract) {
    contract = fetch("/v1/openapi.json").then((r) => (r.ok ? r.json() : Promise.reject(new Error("no contract"))));
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
