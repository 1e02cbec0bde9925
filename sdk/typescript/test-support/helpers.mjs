// Shared by the tests: configuration from the environment (set by
// tests/sdk/test_typescript_sdk.py) and a fetch that records what the SDK sends.
import { PersonaClient } from "@persona-service/sdk";

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A required setting; these tests run on the real stack through tests/sdk/test_typescript_sdk.py. */
export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/sdk/test_typescript_sdk.py`);
  return value;
}

/**
 * A fetch that calls the real one and records each request (headers, when it
 * was sent) and its response (status, headers, when it arrived).
 */
export function recorder(inner = (url, init) => fetch(url, init)) {
  const calls = [];
  const record = async (url, init) => {
    const call = { url, method: init.method, headers: new Headers(init.headers), sentAt: performance.now() };
    calls.push(call);
    const response = await inner(url, init);
    call.status = response.status;
    call.responseHeaders = response.headers;
    call.receivedAt = performance.now();
    return response;
  };
  return { fetch: record, calls };
}

/** A client of the session stack (`PERSONA_SDK_BASE_URL`), recording its requests. */
export function client(options = {}) {
  const { fetch: recorded, calls } = recorder(options.fetch);
  const sdk = new PersonaClient({
    apiKey: env("PERSONA_SDK_API_KEY"),
    baseUrl: env("PERSONA_SDK_BASE_URL"),
    backoffBaseMs: 20,
    ...options,
    fetch: recorded,
  });
  return { sdk, calls };
}

/** Polls `check` until it is truthy (or fails after `timeoutMs`). */
export async function waitFor(check, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${check}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The promise's rejection (fails if it resolves). */
export async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}
