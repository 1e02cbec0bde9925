// What needs no service: SSE framing, Retry-After parsing, network errors
// (a closed port), signatures against a vector from the server's signing.py,
// path encoding, and that every operation of gen/openapi.json has a method.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { test } from "node:test";

import {
  APIConnectionError,
  ChatMessageStream,
  EventStream,
  OPERATIONS,
  PersonaClient,
  PersonaError,
  readFrames,
  retryAfterMs,
  signWebhook,
  verifyWebhook,
} from "@persona-service/sdk";
import { recorder, rejection, UUID_V4 } from "../test-support/helpers.mjs";

function sseResponse(chunks) {
  const encoder = new TextEncoder();
  const body = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", "x-run-id": "run_1" } });
}

test("SSE framing: CRLF and LF, split chunks, comments, multi-line data, a frame without data, the end event", async () => {
  const wire = [
    ": a comment\r\nid: run_1.1\r\nevent: a\r\ndata: {\"n\":",
    "1}\r\n\r\nid: run_1.2\nevent: b\ndata: {\"lines\":\ndata: 2}\n\n",
    "id: run_1.3\nevent: without-data\n\n: keep-alive\n\nretry: 100\n\n",
    "event: end\ndata: {\"runId\":\"run_1\",\"status\":\"completed\"}\n\n",
  ];
  const stream = new EventStream(async () => sseResponse(wire));
  const frames = [];
  for await (const frame of stream) frames.push(frame);
  assert.deepEqual(frames, [
    { id: "run_1.1", event: "a", data: "{\"n\":1}" },
    { id: "run_1.2", event: "b", data: "{\"lines\":\n2}" },
    // Delivered (its id is where a resume starts); a comment or `retry:` alone is no frame.
    { id: "run_1.3", event: "without-data", data: "" },
  ]);
  assert.equal(stream.status, "completed");
  assert.equal(stream.runId, "run_1");
  assert.equal(stream.lastEventId, "run_1.3");
});

test("SSE: a final frame without its blank line is not delivered; the resume fetches it whole", async () => {
  // The full contract, shared with the Python SDK: tests/sdk/sse_cases.json (tests/sdk/test_sse_contract.py).
  const frames = async (wire) => {
    const got = [];
    for await (const frame of readFrames(sseResponse(wire).body)) got.push(frame);
    return got;
  };
  const end = "event: end\ndata: {\"runId\":\"run_1\",\"status\":\"completed\"}";
  const first = { id: "run_1.1", event: "message", data: "1" };
  assert.deepEqual(await frames(["id: run_1.1\ndata: 1\n\n", `${end}\n`]), [first]);
  assert.deepEqual(await frames(["id: run_1.1\ndata: 1\r\n\r\n", "id: run_1.2\r\ndata: [DONE]\r"]), [first]);
  assert.deepEqual(await frames(["id: run_1.1\ndata: 1\n\n", "id: run_1.2\ndata: {\"cu"]), [first]);
  // A typed stream resumes after the last delivered event and ends on the `end` it then gets whole.
  const asked = [];
  const bodies = [["id: run_1.1\nevent: message.delta\ndata: {\"delta\":\"Hi\"}\n\n", `${end}\n`], [`${end}\n\n`]];
  const stream = new ChatMessageStream(async (lastEventId) => {
    asked.push(lastEventId);
    return sseResponse(bodies[asked.length - 1]);
  }, { resumeDelayMs: 1 });
  const events = [];
  for await (const event of stream) events.push(event.event);
  assert.deepEqual(events, ["message.delta"]);
  assert.deepEqual(asked, [undefined, "run_1.1"]);
  assert.equal(stream.status, "completed");
  assert.equal(stream.text, "Hi");
});

test("SSE: a body that ends before any event cannot be resumed", async () => {
  const stream = new EventStream(async () => sseResponse(["id: run_1.1\nevent: a\ndata: {\"cut"]));
  const error = await rejection(stream.done());
  assert.ok(error instanceof APIConnectionError, String(error));
});

test("Retry-After: seconds or an HTTP-date", () => {
  assert.equal(retryAfterMs("1"), 1000);
  assert.equal(retryAfterMs("2.5"), 2500);
  const now = Date.parse("2030-01-01T00:00:00Z");
  assert.equal(retryAfterMs("Tue, 01 Jan 2030 00:00:30 GMT", now), 30_000);
  assert.equal(retryAfterMs(null), undefined);
  assert.equal(retryAfterMs("soon"), undefined);
});

async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

test("network errors: idempotent calls are retried (same Idempotency-Key), stream starts are not", async () => {
  const { fetch, calls } = recorder();
  const client = new PersonaClient({ apiKey: "sk_test_x", baseUrl: await closedPort(), backoffBaseMs: 5, fetch });
  const read = await rejection(client.personas.get("p1"));
  assert.ok(read instanceof APIConnectionError && read instanceof PersonaError);
  assert.equal(read.status, 0);
  assert.equal(calls.length, 4, "1 try and 3 retries");
  assert.equal(calls[0].headers.get("idempotency-key"), null, "reads carry no key");

  calls.length = 0;
  await rejection(client.personas.create({ intent: "A calm sailor" }));
  assert.equal(calls.length, 4);
  const keys = new Set(calls.map((c) => c.headers.get("idempotency-key")));
  assert.equal(keys.size, 1);
  assert.match([...keys][0], UUID_V4);

  calls.length = 0;
  const stream = client.chat.streamMessage("chs_x", { content: "hi" });
  assert.ok((await rejection(stream.done())) instanceof APIConnectionError);
  assert.equal(calls.length, 1, "a new run each time: never retried");

  calls.length = 0;
  const off = new PersonaClient({ baseUrl: client.baseUrl, maxRetries: 0, fetch });
  await rejection(off.personas.get("p1"));
  assert.equal(calls.length, 1, "retries off");
});

// The server's own signing (persona_service.webhooks.signing.signature_header) of this payload.
const PAYLOAD = "{\"id\":\"evt_1\",\"type\":\"webhook.endpoint.test_ping\",\"data\":{\"note\":\"héllo\"}}";
const HEADER = "t=1700000000,v1=4db1415757eb4d2366bd58681bd8c7a091c2c940a2a171662e6acbd424e55a26,"
  + "v1=a08d54924bb77adc11df586c7817e72603ed67d7f648aa63204144d508b4f8d3";

test("webhook signatures match the server's signing.py", async () => {
  assert.equal(await signWebhook(PAYLOAD, ["whsec_current", "whsec_previous"], 1700000000), HEADER);
  const now = 1700000100;
  assert.equal(await verifyWebhook(PAYLOAD, HEADER, "whsec_current", { now }), true);
  assert.equal(await verifyWebhook(new TextEncoder().encode(PAYLOAD), HEADER, ["whsec_previous"], { now }), true);
  assert.equal(await verifyWebhook(PAYLOAD, HEADER, "whsec_other", { now }), false);
  assert.equal(await verifyWebhook(PAYLOAD, HEADER, "whsec_current", { now: 1700000301 }), false);
  assert.equal(await verifyWebhook(PAYLOAD, HEADER, "whsec_current", { now: new Date(1700000300_000) }), true);
  assert.equal(await verifyWebhook(PAYLOAD, "t=17e8,v1=00", "whsec_current", { now }), false);
  assert.equal(await verifyWebhook(PAYLOAD, "v1=00", "whsec_current", { now }), false);
  assert.equal(await verifyWebhook(PAYLOAD, "", "whsec_current", { now }), false);
  assert.equal(await verifyWebhook(PAYLOAD, HEADER, [], { now }), false);
});

test("path parameters are encoded, never empty", async () => {
  const { fetch, calls } = recorder(async () => new Response("{}", { headers: { "content-type": "application/json" } }));
  const client = new PersonaClient({ baseUrl: "http://sdk.invalid/", fetch });
  await client.config.get("engine.pipeline.audit.threshold", { personaId: "a b" });
  await client.personas.get("..");
  await client.files.get("orgs/o1/a b.png", { expires: 5, signature: "s" });
  assert.deepEqual(calls.map((c) => c.url), [
    "http://sdk.invalid/v1/config/engine.pipeline.audit.threshold?personaId=a+b",
    "http://sdk.invalid/v1/personas/%2E%2E",
    "http://sdk.invalid/v1/files/orgs/o1/a%20b.png?expires=5&signature=s",
  ]);
  assert.equal(calls[2].headers.get("authorization"), null, "anonymous operations send no credentials");
  await assert.rejects(() => client.personas.get(""), TypeError);
  assert.throws(() => new PersonaClient({ maxRetries: -1 }), TypeError);
});

test("every operation of gen/openapi.json has its method", () => {
  const spec = JSON.parse(readFileSync(new URL("../../../gen/openapi.json", import.meta.url), "utf8"));
  const ids = Object.values(spec.paths).flatMap((item) => Object.values(item).map((op) => op.operationId)).sort();
  assert.deepEqual(OPERATIONS.map((o) => o.operationId).sort(), ids);
  const client = new PersonaClient();
  for (const op of OPERATIONS) assert.equal(typeof client[op.resource][op.method], "function", op.operationId);
  assert.equal(typeof client.personas.streamCreate, "function");
  assert.equal(typeof client.chat.streamMessage, "function");
  assert.equal(typeof client.webhooks.create, "function");
});
