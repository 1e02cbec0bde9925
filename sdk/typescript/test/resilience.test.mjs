// The retry policy on a stack whose provider is the OpenAI stub (faults are
// injected through PERSONA_SDK_CONTROL_URL): a 502 provider_error retried with
// the same Idempotency-Key, a 429 rate_limited whose Retry-After is waited out.
// The tests of this file share the stub, so they run one after another.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { beforeEach, test } from "node:test";

import { PersonaClient, ProviderError, RateLimitedError } from "@persona-service/sdk";
import { env, recorder, rejection, UUID_V4, waitFor } from "../test-support/helpers.mjs";

async function control(path, body) {
  const init = body === undefined ? { method: "GET" } : { method: "POST", body: JSON.stringify(body) };
  const response = await fetch(`${env("PERSONA_SDK_CONTROL_URL")}${path}`, init);
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

function stubClient(options = {}) {
  const { fetch, calls } = recorder();
  const sdk = new PersonaClient({
    apiKey: env("PERSONA_SDK_STUB_API_KEY"), baseUrl: env("PERSONA_SDK_STUB_BASE_URL"), backoffBaseMs: 50, fetch,
    ...options,
  });
  return { sdk, calls };
}

// The server tries the provider 4 times (3 retries) before answering 502: 4 failures fail one call.
const ONE_CALL = 4;

beforeEach(() => control("/reset", {}));

test("provider_error 502: retried after the backoff with the same Idempotency-Key, then succeeds", async () => {
  await control("/error", { times: ONE_CALL, status: 500, path: "/moderations" });
  const { sdk, calls } = stubClient();
  const persona = await sdk.personas.create({ intent: "A gentle blacksmith who forges wind chimes" });
  assert.equal(persona.state, "active");
  assert.deepEqual(calls.map((c) => c.status), [502, 200]);
  const [first, second] = calls.map((c) => c.headers.get("idempotency-key"));
  assert.match(first, UUID_V4);
  assert.equal(second, first);
  assert.ok(calls[1].sentAt - calls[0].receivedAt >= 45, "waited the 50 ms backoff");
  assert.equal((await control("/requests?suffix=/moderations")).count, ONE_CALL + 1);
});

test("provider_error 502: the caller's own key is kept; with retries off the typed error is thrown", async () => {
  await control("/error", { times: ONE_CALL * 2, status: 500, path: "/moderations" });
  const off = stubClient({ maxRetries: 0 });
  const error = await rejection(off.sdk.personas.create({ intent: "A nervous wizard who collects teacups" }));
  assert.ok(error instanceof ProviderError, String(error));
  assert.equal(error.status, 502);
  assert.equal(error.code, "provider_error");
  assert.equal(error.requestId, off.calls[0].responseHeaders.get("x-request-id"));
  assert.equal(off.calls.length, 1);

  const { sdk, calls } = stubClient();
  const idempotencyKey = `own-${randomUUID()}`;
  await sdk.personas.create({ intent: "A tidy librarian who whistles" }, { idempotencyKey });
  assert.deepEqual(calls.map((c) => c.status), [502, 200]);
  assert.deepEqual(calls.map((c) => c.headers.get("idempotency-key")), [idempotencyKey, idempotencyKey]);
});

test("rate_limited 429: waits Retry-After (1 s) and retries with the same key until admitted", async () => {
  // A Free organization runs one generation at a time: hold one in a slow provider call.
  await control("/delay", { times: 1, seconds: 1.5, path: "/moderations" });
  const free = { apiKey: env("PERSONA_SDK_STUB_FREE_KEY") };
  const held = new PersonaClient({ ...free, baseUrl: env("PERSONA_SDK_STUB_BASE_URL") })
    .personas.create({ intent: "A slow tortoise who races snails" });
  let heldError;
  held.catch((error) => { heldError = error; }); // awaited at the end
  await waitFor(async () => {
    if (heldError) throw heldError;
    return (await control("/requests?suffix=/moderations")).count >= 1;
  });

  const off = stubClient({ ...free, maxRetries: 0 });
  const error = await rejection(off.sdk.personas.create({ intent: "An impatient hare" }));
  assert.ok(error instanceof RateLimitedError, String(error));
  assert.equal(error.status, 429);
  assert.equal(error.details.limit, "concurrent_generations");
  assert.equal(error.headers.get("retry-after"), "1");
  assert.ok(error.requestId);
  assert.equal(off.calls.length, 1);

  const { sdk, calls } = stubClient(free);
  const persona = await sdk.personas.create({ intent: "A patient hare who waits its turn" });
  assert.equal(persona.state, "active");
  const statuses = calls.map((c) => c.status);
  assert.equal(statuses[0], 429);
  assert.equal(statuses.at(-1), 200);
  assert.ok(calls.length >= 2 && calls.length <= 4, statuses.join());
  for (let i = 1; i < calls.length; i++) {
    assert.equal(calls[i - 1].responseHeaders.get("retry-after"), "1");
    const waited = calls[i].sentAt - calls[i - 1].receivedAt;
    assert.ok(waited >= 990, `retry ${i} came after ${waited} ms, before Retry-After`);
  }
  assert.equal(new Set(calls.map((c) => c.headers.get("idempotency-key"))).size, 1);
  assert.equal((await held).state, "active");
});
