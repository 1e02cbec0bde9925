import { randomUUID } from "./crypto.js";
import { errorOfResponse } from "./decode.js";
import { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, PersonaError } from "./errors.js";
import { DEFAULT_BASE_URL } from "./generated.js";
import { ChatCompletionStream, ChatMessageStream, EventStream, PersonaStream, type SseFrame } from "./streaming.js";

/** The `fetch` the client calls (the global one by default). */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** An API key (`sk_live_…`), a session JWT or a SCIM token, sent as `Authorization: Bearer …`. */
  apiKey?: string | undefined;
  /** The edge's base URL (default: the OpenAPI document's server, `http://127.0.0.1:8080`). */
  baseUrl?: string | undefined;
  /** Automatic retries of one call (default 3; 0 turns retries off). */
  maxRetries?: number | undefined;
  /** First backoff of `provider_error` / `provider_timeout` and network errors, doubling (default 1000: 1 s, 2 s, 4 s). */
  backoffBaseMs?: number | undefined;
  /** A `rate_limited` whose `Retry-After` is longer than this is not waited for but thrown (default 60). */
  maxRetryAfterSeconds?: number | undefined;
  /** Per attempt: until the whole answer is read (JSON) or until the response starts (streams, raw) (default 60000). */
  timeoutMs?: number | undefined;
  /** Resumes of a dropped stream in a row before giving up (default 3). */
  maxStreamResumes?: number | undefined;
  /** Wait before resuming a dropped stream, times the drops in a row (default 500). */
  streamResumeDelayMs?: number | undefined;
  /** Headers sent with every request. */
  headers?: Record<string, string> | undefined;
  /** A `fetch` to use instead of the global one (to record, proxy or test). */
  fetch?: Fetch | undefined;
}

export interface RequestOptions {
  /** The `Idempotency-Key` of a write (default: a new UUID per call, the same for all its retries). */
  idempotencyKey?: string | undefined;
  /** Extra headers of this call. */
  headers?: Record<string, string> | undefined;
  /** Cancels the call (throws `APIUserAbortError`). */
  signal?: AbortSignal | undefined;
  /** This call's `timeoutMs`. */
  timeoutMs?: number | undefined;
  /** This call's `maxRetries`. */
  maxRetries?: number | undefined;
  /** Streams: resume the run after this event id (`Last-Event-ID`) instead of starting one. */
  lastEventId?: string | undefined;
}

/** How a generated method describes its request. */
export interface RequestSpec {
  path?: Record<string, string | number>;
  query?: object;
  body?: unknown;
  contentType?: string;
  options?: RequestOptions | undefined;
  /** false: an anonymous operation (no `Authorization`). */
  auth?: boolean;
  redirect?: RequestRedirect;
}

/**
 * The promise of a call's parsed answer; `.withResponse()` gives the
 * `Response` too (headers such as `Idempotent-Replayed`, rate limits).
 */
export class APIPromise<T> implements PromiseLike<T> {
  readonly #result: Promise<{ data: T; response: Response }>;

  constructor(result: Promise<{ data: T; response: Response }>) {
    this.#result = result;
  }

  /** The parsed answer and the raw `Response` (its body already read). */
  withResponse(): Promise<{ data: T; response: Response }> {
    return this.#result;
  }

  then<A = T, B = never>(onfulfilled?: ((value: T) => A | PromiseLike<A>) | null,
                         onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    return this.#result.then((r) => r.data).then(onfulfilled, onrejected);
  }

  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<T | B> {
    return this.then(undefined, onrejected);
  }

  finally(onfinally?: (() => void) | null): Promise<T> {
    return this.#result.then((r) => r.data).finally(onfinally);
  }

  get [Symbol.toStringTag](): string {
    return "APIPromise";
  }
}

/** The item type of a list response: its `items`. */
export type PageItem<R> = R extends { items?: Array<infer T> } ? T : never;

type StreamKinds = {
  chat: ChatMessageStream;
  persona: PersonaStream;
  completion: ChatCompletionStream;
  frames: EventStream<SseFrame>;
};
const STREAMS = { chat: ChatMessageStream, persona: PersonaStream, completion: ChatCompletionStream, frames: EventStream };

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);
type Mode = "json" | "raw" | "stream";

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new APIUserAbortError());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new APIUserAbortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** `Retry-After` in milliseconds: seconds, or an HTTP-date. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function encodeSegment(value: string): string {
  const encoded = encodeURIComponent(value);
  // "." and ".." would be resolved away by URL parsing and reach another route.
  return encoded === "." ? "%2E" : encoded === ".." ? "%2E%2E" : encoded;
}

function isJsonType(contentType: string): boolean {
  return contentType === "application/json" || contentType.endsWith("+json");
}

/**
 * The HTTP engine under the generated resources: URLs, headers, the retry
 * policy, idempotency keys, typed errors, pagination and streams.
 *
 * Retries (spec "Retry semantics"): `provider_error` (502) and
 * `provider_timeout` (504) back off 1 s, 2 s, 4 s; `rate_limited` (429)
 * and `service_unavailable` (503) wait their `Retry-After`; at most
 * `maxRetries` (3) retries each. An answer with `x-should-retry: false` (or
 * `details.retryable: false`) is never retried, whatever its code. Network
 * errors are retried like `provider_error` when the request is idempotent
 * (a read, a write with its `Idempotency-Key`, a stream resume). Nothing
 * else is retried: `validation_failed`, `idempotency_conflict`,
 * `drift_blocked`, `audit_blocked`, `moderation_blocked`, `forbidden`,
 * `quota_exceeded` (its `Retry-After` is the monthly reset), …
 */
export class Core {
  readonly baseUrl: string;
  readonly maxRetries: number;
  readonly backoffBaseMs: number;
  readonly maxRetryAfterSeconds: number;
  readonly timeoutMs: number;
  readonly maxStreamResumes: number;
  readonly streamResumeDelayMs: number;
  readonly #apiKey: string | undefined;
  readonly #headers: Record<string, string>;
  readonly #fetch: Fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.maxRetries = options.maxRetries ?? 3;
    this.backoffBaseMs = options.backoffBaseMs ?? 1000;
    this.maxRetryAfterSeconds = options.maxRetryAfterSeconds ?? 60;
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxStreamResumes = options.maxStreamResumes ?? 3;
    this.streamResumeDelayMs = options.streamResumeDelayMs ?? 500;
    for (const [name, value] of Object.entries({ maxRetries: this.maxRetries, backoffBaseMs: this.backoffBaseMs,
      timeoutMs: this.timeoutMs, maxStreamResumes: this.maxStreamResumes })) {
      if (!Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be a number >= 0, not ${value}`);
    }
    this.#apiKey = options.apiKey;
    this.#headers = { ...options.headers };
    // Called as a plain function: browsers refuse `fetch` called on another object.
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** Calls a JSON operation: the parsed body (undefined for an empty one). */
  request<T>(method: string, path: string, spec: RequestSpec = {}): APIPromise<T> {
    return new APIPromise(this.#send(method, path, spec, "json", async (response) => {
      const text = await response.text();
      try {
        return (text ? JSON.parse(text) : undefined) as T;
      } catch {
        throw new PersonaError({ status: response.status, code: "invalid_response", headers: response.headers,
          message: `${method} ${path} answered ${response.status} with a body that is not JSON.`,
          requestId: response.headers.get("x-request-id") ?? undefined });
      }
    }));
  }

  /** Calls an operation whose answer is not JSON: the `Response`, its body unread (3xx included). */
  raw(method: string, path: string, spec: RequestSpec = {}): APIPromise<Response> {
    return new APIPromise(this.#send(method, path, spec, "raw", async (response) => response));
  }

  /** Starts a server-sent event stream. */
  stream<K extends keyof StreamKinds>(kind: K, method: string, path: string, spec: RequestSpec = {}): StreamKinds[K] {
    const Stream = STREAMS[kind];
    let key = spec.options?.idempotencyKey;
    const open = async (lastEventId: string | undefined, signal: AbortSignal) => {
      // A resume is the same call: it carries the same Idempotency-Key.
      key ??= WRITES.has(method) ? await randomUUID() : undefined;
      const options = { ...spec.options, idempotencyKey: key, signal };
      const sent = await this.#send(method, path, { ...spec, options }, "stream", async (r) => r, lastEventId);
      return sent.response;
    };
    return new Stream(open, { maxResumes: this.maxStreamResumes, resumeDelayMs: this.streamResumeDelayMs,
      signal: spec.options?.signal, lastEventId: spec.options?.lastEventId }) as StreamKinds[K];
  }

  /**
   * Every item of a list method, page after page: every list takes `cursor`
   * and `limit` and answers `items` and `nextCursor` (empty on the last page).
   * `for await (const e of client.paginate((p) => client.events.list(p), { type: "persona.created" }))`;
   * each list's `…Iter` is this, typed.
   */
  paginate<P extends object, R>(list: (params: P) => PromiseLike<R>, params?: P): AsyncIterableIterator<PageItem<R>> {
    return (async function* () {
      let query = { ...params } as P & { cursor?: string };
      for (;;) {
        const page = (await list(query)) as { items?: unknown; nextCursor?: unknown };
        if (Array.isArray(page.items)) yield* page.items as PageItem<R>[];
        const next = page.nextCursor;
        if (typeof next !== "string" || next === "" || next === query.cursor) return;
        query = { ...query, cursor: next };
      }
    })();
  }

  #url(template: string, path: Record<string, string | number> | undefined, query: object | undefined): string {
    const filled = template.replace(/\{([^}=]+)(=\*\*)?\}/g, (_, name: string, multi: string | undefined) => {
      const value = path?.[name];
      if (value === undefined || value === null || String(value) === "") {
        throw new TypeError(`The path parameter ${name} of ${template} is required.`);
      }
      return multi ? String(value).split("/").map(encodeSegment).join("/") : encodeSegment(String(value));
    });
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const one of Array.isArray(value) ? value : [value]) search.append(name, String(one));
    }
    const qs = search.toString();
    return `${this.baseUrl}${filled}${qs ? `?${qs}` : ""}`;
  }

  async #send<T>(method: string, path: string, spec: RequestSpec, mode: Mode, read: (response: Response) => Promise<T>,
                 lastEventId?: string): Promise<{ data: T; response: Response }> {
    const options = spec.options ?? {};
    const url = this.#url(path, spec.path, spec.query);
    const headers = new Headers(this.#headers);
    headers.set("Accept", mode === "stream" ? "text/event-stream" : mode === "json" ? "application/json" : "*/*");
    if (spec.auth !== false && this.#apiKey) headers.set("Authorization", `Bearer ${this.#apiKey}`);
    let body: BodyInit | undefined;
    if (spec.body !== undefined) {
      const type = spec.contentType ?? "application/json";
      body = isJsonType(type) ? JSON.stringify(spec.body) : (spec.body as BodyInit);
      headers.set("Content-Type", type === "*/*" ? "application/octet-stream" : type);
    }
    // One key for the call, sent again on each retry so the server applies the write once.
    const key = WRITES.has(method) ? options.idempotencyKey ?? (await randomUUID()) : undefined;
    if (key !== undefined) headers.set("Idempotency-Key", key);
    if (lastEventId !== undefined) headers.set("Last-Event-ID", lastEventId);
    for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value);
    // Stream starts ignore Idempotency-Key (a new run each time); resumes are reads.
    const idempotent = !WRITES.has(method) || (mode !== "stream" && key !== undefined) || lastEventId !== undefined;
    const maxRetries = options.maxRetries ?? this.maxRetries;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const init: RequestInit = { method, headers, redirect: spec.redirect ?? "follow" };
    if (body !== undefined) init.body = body;

    for (let attempt = 0; ; attempt++) {
      let result: { data: T; response: Response } | PersonaError;
      try {
        result = await this.#attempt(url, init, timeoutMs, options.signal, mode, read);
      } catch (error) {
        if (error instanceof APIConnectionError && idempotent && attempt < maxRetries) {
          await sleep(this.backoffBaseMs * 2 ** attempt, options.signal);
          continue;
        }
        throw error;
      }
      if (!(result instanceof PersonaError)) return result;
      const delay = attempt < maxRetries ? this.retryDelayMs(result, attempt) : undefined;
      if (delay === undefined) throw result;
      await sleep(delay, options.signal);
    }
  }

  /** One try: the answer read under the timeout, the typed error of a failed status, or a thrown network error. */
  async #attempt<T>(url: string, init: RequestInit, timeoutMs: number, signal: AbortSignal | undefined, mode: Mode,
                    read: (response: Response) => Promise<T>): Promise<{ data: T; response: Response } | PersonaError> {
    if (signal?.aborted) throw new APIUserAbortError();
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const failed = (error: unknown): never => {
      if (signal?.aborted) throw new APIUserAbortError();
      if (timedOut) throw new APIConnectionTimeoutError(`No answer from ${init.method} ${url} within ${timeoutMs} ms.`, error);
      throw new APIConnectionError(`${init.method} ${url} failed: ${error instanceof Error ? error.message : error}`, error);
    };
    let response: Response;
    try {
      response = await this.#fetch(url, { ...init, signal: controller.signal });
    } catch (error) {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      return failed(error);
    }
    // A stream keeps the caller's signal wired to the connection for as long as it is read.
    const keepSignal = mode === "stream" && response.ok;
    try {
      if (response.ok || (mode === "raw" && response.status < 400)) {
        return { data: await read(response), response };
      }
      return errorOfResponse(response.status, await response.text(), response.headers);
    } catch (error) {
      if (error instanceof PersonaError) throw error;
      return failed(error);
    } finally {
      clearTimeout(timer);
      if (!keepSignal) signal?.removeEventListener("abort", onAbort);
    }
  }

  /** How long to wait before retrying after this error, or undefined not to retry it. */
  protected retryDelayMs(error: PersonaError, attempt: number): number | undefined {
    // The service's own signal wins: `x-should-retry: false` or `details.retryable: false` (a model failure
    // the same call would meet again: a wrong key, a model the server does not have) is never retried.
    if (error.headers.get("x-should-retry")?.trim().toLowerCase() === "false") return undefined;
    if (error.details.retryable === false) return undefined;
    const backoff = this.backoffBaseMs * 2 ** attempt;
    switch (error.code) {
      case "provider_error":
      case "provider_timeout": {
        // A model server that asked to wait (`Retry-After`): no sooner than that.
        const asked = retryAfterMs(error.headers.get("retry-after"));
        if (asked === undefined) return backoff;
        return asked <= this.maxRetryAfterSeconds * 1000 ? Math.max(backoff, asked) : undefined;
      }
      case "rate_limited":
      case "service_unavailable": {
        const seconds = error.details.retryAfter;
        const wait = retryAfterMs(error.headers.get("retry-after"))
          ?? (typeof seconds === "number" ? seconds * 1000 : backoff);
        return wait <= this.maxRetryAfterSeconds * 1000 ? wait : undefined;
      }
      default:
        return undefined;
    }
  }
}
