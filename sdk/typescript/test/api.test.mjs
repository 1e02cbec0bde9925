// Typed errors, never-retried codes, idempotency and pagination on the session stack.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { before, describe, test } from "node:test";

import {
  ForbiddenError,
  IdempotencyConflictError,
  NotFoundError,
  PersonaClient,
  PersonaError,
  StateConflictError,
  UnauthorizedError,
  ValidationFailedError,
} from "@persona-service/sdk";
import { client, env, UUID_V4 } from "../test-support/helpers.mjs";

const MISSING = "00000000-0000-4000-8000-000000000000";

/** The rejection of a call, and the requests it made. */
async function failure(call, options) {
  const { sdk, calls } = client(options);
  try {
    await call(sdk);
  } catch (error) {
    return { error, calls };
  }
  throw new Error("expected the call to fail");
}

describe("typed errors, never retried", () => {
  test("validation_failed: one request, ValidationFailedError with the request id", async () => {
    const { error, calls } = await failure((sdk) => sdk.personas.create({ intent: "" }));
    assert.ok(error instanceof ValidationFailedError && error instanceof PersonaError, String(error));
    assert.equal(calls.length, 1);
    assert.equal(error.status, 422);
    assert.equal(error.code, "validation_failed");
    assert.equal(error.name, "ValidationFailedError");
    assert.equal(error.details.validationErrors[0].path, "intent");
    assert.ok(error.message);
    assert.match(error.requestId, /\S/);
    assert.equal(error.requestId, calls[0].responseHeaders.get("x-request-id"));
    assert.equal(error.headers.get("x-request-id"), error.requestId);
  });

  test("forbidden: a key without the scope, one request", async () => {
    const options = { apiKey: env("PERSONA_SDK_READ_ONLY_KEY") };
    const { error, calls } = await failure((sdk) => sdk.personas.create({ intent: "A quiet potter" }), options);
    assert.ok(error instanceof ForbiddenError, String(error));
    assert.equal(error.status, 403);
    assert.equal(calls.length, 1);
  });

  test("unauthorized, not_found and state_conflict", async () => {
    const bad = await failure((sdk) => sdk.personas.list(), { apiKey: "sk_live_not_a_key" });
    assert.ok(bad.error instanceof UnauthorizedError && bad.error.status === 401, String(bad.error));
    const missing = await failure((sdk) => sdk.personas.get(MISSING));
    assert.ok(missing.error instanceof NotFoundError && missing.error.requestId, String(missing.error));
    assert.equal(missing.calls.length, 1);

    const { sdk } = client();
    const persona = await sdk.personas.create({ intent: "A stubborn ferryman who hums sea shanties" });
    const session = await sdk.chat.createSession({ personaId: persona.id });
    await sdk.chat.endSession(session.sessionId);
    const again = await failure((s) => s.chat.endSession(session.sessionId));
    assert.ok(again.error instanceof StateConflictError, String(again.error));
    assert.equal(again.error.details.conflictField, "status");
    assert.equal(again.calls.length, 1);
  });

  test("the portrait edit's and SCIM's error shapes are typed errors too", async () => {
    const edit = await failure((sdk) => sdk.portraits.edit(MISSING, MISSING, { instruction: "make it blue" }));
    assert.ok(edit.error instanceof NotFoundError, String(edit.error));
    assert.equal(edit.error.message, "The source portrait does not exist.");
    const scim = await failure((sdk) => sdk.scim.getUser("nope"));
    assert.ok(scim.error instanceof PersonaError && scim.error.status >= 400, String(scim.error));
    assert.ok(scim.error.message && scim.error.requestId);
  });
});

describe("idempotency", () => {
  test("every write carries a new UUID key; reads carry none", async () => {
    const { sdk, calls } = client();
    const persona = await sdk.personas.create({ intent: "A careful locksmith who collects keys" });
    await sdk.personas.get(persona.id);
    await sdk.personas.update(persona.id, { displayName: "Keys" });
    const [create, read, update] = calls.map((c) => c.headers.get("idempotency-key"));
    assert.match(create, UUID_V4);
    assert.match(update, UUID_V4);
    assert.notEqual(create, update);
    assert.equal(read, null);
  });

  test("the same key replays the stored answer; with another payload it is idempotency_conflict, not retried", async () => {
    const { sdk, calls } = client();
    const idempotencyKey = randomUUID();
    const body = { intent: "A thoughtful cartographer of tide pools" };
    const first = await sdk.personas.create(body, { idempotencyKey }).withResponse();
    const replay = await sdk.personas.create(body, { idempotencyKey }).withResponse();
    assert.deepEqual(replay.data, first.data);
    assert.equal(first.response.headers.get("idempotent-replayed"), null);
    assert.equal(replay.response.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(calls.map((c) => c.headers.get("idempotency-key")), [idempotencyKey, idempotencyKey]);

    const { error, calls: conflictCalls } = await failure(
      (s) => s.personas.create({ intent: "Something else entirely" }, { idempotencyKey }));
    assert.ok(error instanceof IdempotencyConflictError, String(error));
    assert.equal(error.status, 409);
    assert.equal(error.details.reason, "payload_mismatch");
    assert.equal(conflictCalls.length, 1);
  });
});

describe("pagination", () => {
  let sdk;
  let calls;
  let personaId;
  const sessions = [];
  const endpoints = [];

  before(async () => {
    ({ sdk, calls } = client({ apiKey: env("PERSONA_SDK_PAGES_KEY") }));
    personaId = (await sdk.personas.create({ intent: "A meticulous archivist of lost letters" })).id;
    for (let i = 0; i < 5; i++) {
      sessions.push((await sdk.chat.createSession({ personaId, title: `page ${i}` })).sessionId);
      const made = await sdk.webhooks.create({ url: `http://127.0.0.1:9/hook-${i}`, events: ["subscription.cancelled"] });
      endpoints.push(made.endpoint.id);
    }
  });

  test("chat.listSessionsIter and client.paginate walk every page", async () => {
    calls.length = 0;
    const seen = [];
    for await (const session of sdk.chat.listSessionsIter({ personaId, limit: 2 })) seen.push(session.sessionId);
    assert.deepEqual(seen, [...sessions].reverse(), "newest first, each once");
    assert.equal(calls.length, 3);
    assert.equal(new URL(calls[0].url).searchParams.get("cursor"), null);
    assert.ok(new URL(calls[1].url).searchParams.get("cursor"));
    const generic = [];
    for await (const s of sdk.paginate((p) => sdk.chat.listSessions(p), { personaId, limit: 2 })) {
      generic.push(s.sessionId);
    }
    assert.deepEqual(generic, seen);
  });

  test("webhooks.listIter and client.paginate walk every page", async () => {
    calls.length = 0;
    const seen = [];
    for await (const endpoint of sdk.webhooks.listIter({ limit: 2 })) seen.push(endpoint.id);
    assert.equal(new Set(seen).size, seen.length, "each once");
    for (const id of endpoints) assert.ok(seen.includes(id), id);
    assert.equal(calls.length, Math.ceil(seen.length / 2));
    assert.ok(new URL(calls[2].url).searchParams.get("cursor"));
    const generic = [];
    for await (const e of sdk.paginate((p) => sdk.webhooks.list(p), { limit: 2 })) generic.push(e.id);
    assert.deepEqual(generic, seen);
    const first = await sdk.webhooks.list({ limit: 2 });
    assert.equal(first.items.length, 2);
    assert.ok(first.nextCursor);
  });
});

test("raw operations answer the Response", async () => {
  const anonymous = new PersonaClient({ baseUrl: env("PERSONA_SDK_BASE_URL") });
  assert.equal((await anonymous.probes.getLiveness()).status, "ok");
  const metrics = await anonymous.probes.getMetrics();
  assert.ok(metrics instanceof Response && metrics.status === 200);
  assert.match(await metrics.text(), /# HELP/);
});

describe("chat controls, the message preview and usage over time", () => {
  test("regenerate keeps alternatives, select, edit and delete; preview spends nothing; usage by persona", async () => {
    const { sdk } = client();
    const persona = await sdk.personas.create({ intent: "A quiet lamplighter who counts the stars" });
    const session = await sdk.chat.createSession({ personaId: persona.id });
    const preview = await sdk.chat.previewMessage(session.sessionId, { content: "Which star is brightest?", maxTokens: 3 });
    assert.equal(preview.outputTokens, 3);
    assert.ok(preview.costUsdMicros > 0 && preview.quota.some((q) => q.name === "chat.messages" && q.units === 1));
    assert.equal((await sdk.chat.getSession(session.sessionId)).messageCount, 0);

    const sent = await sdk.chat.sendMessage(session.sessionId, { content: "Which star is brightest?", temperature: 1 });
    const again = await sdk.chat.regenerateMessage(session.sessionId, sent.reply.id, { temperature: 0.2 });
    assert.deepEqual([again.reply.swipeIndex, again.reply.swipeCount], [1, 2]);
    assert.equal((await sdk.chat.chooseMessage(session.sessionId, again.reply.id, { swipeIndex: 0 })).id, sent.reply.id);
    const edited = await sdk.chat.updateMessage(session.sessionId, sent.userMessage.id, { content: "And the faintest?" });
    assert.ok(edited.message.edited);
    assert.equal(edited.removedCount, 1);
    const deleted = await sdk.chat.deleteMessage(session.sessionId, sent.userMessage.id);
    assert.equal(deleted.session.messageCount, 0);

    const bounded = await failure((s) => s.chat.sendMessage(session.sessionId, { content: "Hi", maxTokens: 0 }));
    assert.ok(bounded.error instanceof ValidationFailedError, String(bounded.error));
    assert.equal(bounded.error.details.validationErrors[0].path, "maxTokens");

    const usage = await sdk.usage.get({ groupBy: "persona" });
    const bucket = usage.buckets.find((b) => b.key === persona.id);
    assert.equal(bucket.generations, 2);
    assert.ok(usage.totals.costUsdMicros >= bucket.costUsdMicros);
    assert.equal((await sdk.usage.get()).buckets.length, 30);
  });
});
