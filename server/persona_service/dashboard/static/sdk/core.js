// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { randomUUID } from "./crypto.js";
import { errorOfResponse } from "./decode.js";
import { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, PersonaError } from "./errors.js";
import { DEFAULT_BASE_URL } from "./generated.js";
import { ChatCompletionStream, ChatMessageStream, EventStream, PersonaStream } from "./streaming.js";
export class APIPromise {
    #result;
    constructor(result) {
        this.#result = result;
    }
    withResponse() {
        return this.#result;
    }
    then(onfulfilled, onrejected) {
        return this.#result.then((r) => r.data).then(onfulfilled, onrejected);
    }
    catch(onrejected) {
        return this.then(undefined, onrejected);
    }
    finally(onfinally) {
        return this.#result.then((r) => r.data).finally(onfinally);
    }
    get [Symbol.toStringTag]() {
        return "APIPromise";
    }
}
const STREAMS = { chat: ChatMessageStream, persona: PersonaStream, completion: ChatCompletionStream, frames: EventStream };
const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(new APIUserAbortError());
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
export function retryAfterMs(value, now = Date.now()) {
    if (value === null || value.trim() === "")
        return undefined;
    if (/^\s*\d+(\.\d+)?\s*$/.test(value))
        return Math.round(Number(value) * 1000);
    const at = Date.parse(value);
    return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
function encodeSegment(value) {
    const encoded = encodeURIComponent(value);
    return encoded === "." ? "%2E" : encoded === ".." ? "%2E%2E" : encoded;
}
function isJsonType(contentType) {
    return contentType === "application/json" || contentType.endsWith("+json");
}
export class Core {
    baseUrl;
    maxRetries;
    backoffBaseMs;
    maxRetryAfterSeconds;
    timeoutMs;
    maxStreamResumes;
    streamResumeDelayMs;
    #apiKey;
    #headers;
    #fetch;
    constructor(options = {}) {
        this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
        this.maxRetries = options.maxRetries ?? 3;
        this.backoffBaseMs = options.backoffBaseMs ?? 1000;
        this.maxRetryAfterSeconds = options.maxRetryAfterSeconds ?? 60;
        this.timeoutMs = options.timeoutMs ?? 60_000;
        this.maxStreamResumes = options.maxStreamResumes ?? 3;
        this.streamResumeDelayMs = options.streamResumeDelayMs ?? 500;
        for (const [name, value] of Object.entries({ maxRetries: this.maxRetries, backoffBaseMs: this.backoffBaseMs,
            timeoutMs: this.timeoutMs, maxStreamResumes: this.maxStreamResumes })) {
            if (!Number.isFinite(value) || value < 0)
                throw new TypeError(`${name} must be a number >= 0, not ${value}`);
        }
        this.#apiKey = options.apiKey;
        this.#headers = { ...options.headers };
        this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    }
    request(method, path, spec = {}) {
        return new APIPromise(this.#send(method, path, spec, "json", async (response) => {
            const text = await response.text();
            try {
                return (text ? JSON.parse(text) : undefined);
            }
            catch {
                throw new PersonaError({ status: response.status, code: "invalid_response", headers: response.headers,
                    message: `${method} ${path} answered ${response.status} with a body that is not JSON.`,
                    requestId: response.headers.get("x-request-id") ?? undefined });
            }
        }));
    }
    raw(method, path, spec = {}) {
        return new APIPromise(this.#send(method, path, spec, "raw", async (response) => response));
    }
    stream(kind, method, path, spec = {}) {
        const Stream = STREAMS[kind];
        let key = spec.options?.idempotencyKey;
        const open = async (lastEventId, signal) => {
            key ??= WRITES.has(method) ? await randomUUID() : undefined;
            const options = { ...spec.options, idempotencyKey: key, signal };
            const sent = await this.#send(method, path, { ...spec, options }, "stream", async (r) => r, lastEventId);
            return sent.response;
        };
        return new Stream(open, { maxResumes: this.maxStreamResumes, resumeDelayMs: this.streamResumeDelayMs,
            signal: spec.options?.signal, lastEventId: spec.options?.lastEventId });
    }
    paginate(list, params) {
        return (async function* () {
            let query = { ...params };
            for (;;) {
                const page = (await list(query));
                if (Array.isArray(page.items))
                    yield* page.items;
                const next = page.nextCursor;
                if (typeof next !== "string" || next === "" || next === query.cursor)
                    return;
                query = { ...query, cursor: next };
            }
        })();
    }
    #url(template, path, query) {
        const filled = template.replace(/\{([^}=]+)(=\*\*)?\}/g, (_, name, multi) => {
            const value = path?.[name];
            if (value === undefined || value === null || String(value) === "") {
                throw new TypeError(`The path parameter ${name} of ${template} is required.`);
            }
            return multi ? String(value).split("/").map(encodeSegment).join("/") : encodeSegment(String(value));
        });
        const search = new URLSearchParams();
        for (const [name, value] of Object.entries(query ?? {})) {
            if (value === undefined || value === null)
                continue;
            for (const one of Array.isArray(value) ? value : [value])
                search.append(name, String(one));
        }
        const qs = search.toString();
        return `${this.baseUrl}${filled}${qs ? `?${qs}` : ""}`;
    }
    async #send(method, path, spec, mode, read, lastEventId) {
        const options = spec.options ?? {};
        const url = this.#url(path, spec.path, spec.query);
        const headers = new Headers(this.#headers);
        headers.set("Accept", mode === "stream" ? "text/event-stream" : mode === "json" ? "application/json" : "*/*");
        if (spec.auth !== false && this.#apiKey)
            headers.set("Authorization", `Bearer ${this.#apiKey}`);
        let body;
        if (spec.body !== undefined) {
            const type = spec.contentType ?? "application/json";
            body = isJsonType(type) ? JSON.stringify(spec.body) : spec.body;
            headers.set("Content-Type", type === "*/*" ? "application/octet-stream" : type);
        }
        const key = WRITES.has(method) ? options.idempotencyKey ?? (await randomUUID()) : undefined;
        if (key !== undefined)
            headers.set("Idempotency-Key", key);
        if (lastEventId !== undefined)
            headers.set("Last-Event-ID", lastEventId);
        for (const [name, value] of Object.entries(options.headers ?? {}))
            headers.set(name, value);
        const idempotent = !WRITES.has(method) || (mode !== "stream" && key !== undefined) || lastEventId !== undefined;
        const maxRetries = options.maxRetries ?? this.maxRetries;
        const timeoutMs = options.timeoutMs ?? this.timeoutMs;
        const init = { method, headers, redirect: spec.redirect ?? "follow" };
        if (body !== undefined)
            init.body = body;
        for (let attempt = 0;; attempt++) {
            let result;
            try {
                result = await this.#attempt(url, init, timeoutMs, options.signal, mode, read);
            }
            catch (error) {
                if (error instanceof APIConnectionError && idempotent && attempt < maxRetries) {
                    await sleep(this.backoffBaseMs * 2 ** attempt, options.signal);
                    continue;
                }
                throw error;
            }
            if (!(result instanceof PersonaError))
                return result;
            const delay = attempt < maxRetries ? this.retryDelayMs(result, attempt) : undefined;
            if (delay === undefined)
                throw result;
            await sleep(delay, options.signal);
        }
    }
    async #attempt(url, init, timeoutMs, signal, mode, read) {
        if (signal?.aborted)
            throw new APIUserAbortError();
        const controller = new AbortController();
        let timedOut = false;
        const timer = setTimeout(() => {
            timedOut = true;
            controller.abort();
        }, timeoutMs);
        const onAbort = () => controller.abort();
        signal?.addEventListener("abort", onAbort, { once: true });
        const failed = (error) => {
            if (signal?.aborted)
                throw new APIUserAbortError();
            if (timedOut)
                throw new APIConnectionTimeoutError(`No answer from ${init.method} ${url} within ${timeoutMs} ms.`, error);
            throw new APIConnectionError(`${init.method} ${url} failed: ${error instanceof Error ? error.message : error}`, error);
        };
        let response;
        try {
            response = await this.#fetch(url, { ...init, signal: controller.signal });
        }
        catch (error) {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            return failed(error);
        }
        const keepSignal = mode === "stream" && response.ok;
        try {
            if (response.ok || (mode === "raw" && response.status < 400)) {
                return { data: await read(response), response };
            }
            return errorOfResponse(response.status, await response.text(), response.headers);
        }
        catch (error) {
            if (error instanceof PersonaError)
                throw error;
            return failed(error);
        }
        finally {
            clearTimeout(timer);
            if (!keepSignal)
                signal?.removeEventListener("abort", onAbort);
        }
    }
    retryDelayMs(error, attempt) {
        if (error.headers.get("x-should-retry")?.trim().toLowerCase() === "false")
            return undefined;
        if (error.details.retryable === false)
            return undefined;
        const backoff = this.backoffBaseMs * 2 ** attempt;
        switch (error.code) {
            case "provider_error":
            case "provider_timeout": {
                const asked = retryAfterMs(error.headers.get("retry-after"));
                if (asked === undefined)
                    return backoff;
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
