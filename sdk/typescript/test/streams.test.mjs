// Server-sent event streams on the session stack: chat replies (and a resume
// with Last-Event-ID after a dropped connection), persona generation, the
// in-band error event, OpenAI-style completions.
import assert from "node:assert/strict";
import { before, test } from "node:test";

import { APIUserAbortError, ChatMessageStream, ModerationBlockedError, PersonaStream } from "@persona-service/sdk";
import { client, rejection } from "../test-support/helpers.mjs";

const STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"];

let personaId;

before(async () => {
  const { sdk } = client();
  personaId = (await sdk.personas.create({ intent: "A cheerful lighthouse keeper who loves jazz" })).id;
});

async function session() {
  const { sdk } = client();
  return (await sdk.chat.createSession({ personaId })).sessionId;
}

/** The sequence numbers of `<run>.<seq>` ids, all of one run. */
function sequence(events, runId) {
  for (const e of events) assert.equal(e.id.split(".")[0], runId);
  return events.map((e) => Number(e.id.split(".")[1]));
}

test("chat: message.started, deltas, message.completed; finalMessage has usage and cost", async () => {
  const { sdk, calls } = client();
  const stream = sdk.chat.streamMessage(await session(), { content: "What do you love about the sea? Tell me." });
  assert.ok(stream instanceof ChatMessageStream);
  const events = [];
  for await (const event of stream) events.push(event);
  const kinds = events.map((e) => e.event);
  assert.equal(kinds[0], "message.started");
  assert.equal(kinds.at(-1), "message.completed");
  assert.deepEqual(new Set(kinds.slice(1, -1)), new Set(["message.delta"]));
  assert.ok(kinds.length > 3);
  assert.equal(stream.status, "completed");
  assert.match(stream.runId, /^run_/);
  assert.deepEqual(sequence(events, stream.runId), events.map((_, i) => i + 1));
  const reply = await stream.finalMessage();
  assert.equal(events.slice(1, -1).map((e) => e.data.delta).join(""), reply.content);
  assert.equal(stream.text, reply.content);
  assert.equal(reply.role, "assistant");
  assert.ok(reply.usage.inputTokens > 0 && reply.usage.outputTokens > 0 && reply.usage.costUsdMicros > 0, reply.usage);
  const done = await stream.finalEvent();
  assert.equal(done.session.messageCount, 2);
  assert.equal(done.userMessage.content, "What do you love about the sea? Tell me.");
  assert.equal(calls.at(-1).headers.get("accept"), "text/event-stream");
});

/**
 * A fetch whose first event stream breaks after `frames` whole frames (and
 * a piece of the next one), as a dropped connection does.
 */
function droppingFetch(frames) {
  let dropped = false;
  return async (url, init) => {
    const response = await fetch(url, init);
    if (dropped || !response.headers.get("content-type")?.startsWith("text/event-stream")) return response;
    dropped = true;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let cut = false;
    const body = new ReadableStream({
      async pull(controller) {
        // Erroring drops what is still queued: break on the read after the kept bytes.
        if (cut) {
          controller.error(new TypeError("terminated: other side closed"));
          return reader.cancel();
        }
        // pull is not called again until it enqueues: read until `frames` frames are in.
        let parts;
        do {
          const chunk = await reader.read();
          if (chunk.done) return controller.close();
          text += decoder.decode(chunk.value, { stream: true });
          parts = text.split("\n\n");
        } while (parts.length <= frames + 1);
        const kept = `${parts.slice(0, frames).join("\n\n")}\n\n${parts[frames].slice(0, 12)}`;
        controller.enqueue(new TextEncoder().encode(kept));
        cut = true;
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

test("chat: a dropped stream resumes with Last-Event-ID, nothing lost or repeated", async () => {
  const { sdk, calls } = client({ fetch: droppingFetch(3), streamResumeDelayMs: 10 });
  const stream = sdk.chat.streamMessage(await session(), { content: "Describe your lighthouse. Then your lamp." });
  const events = [];
  for await (const event of stream) events.push(event);
  assert.equal(stream.resumes, 1);
  assert.equal(calls.length, 2);
  assert.equal(calls[0].headers.get("last-event-id"), null);
  assert.equal(calls[1].headers.get("last-event-id"), `${stream.runId}.3`);
  assert.equal(calls[1].headers.get("idempotency-key"), calls[0].headers.get("idempotency-key"));
  assert.deepEqual(sequence(events, stream.runId), events.map((_, i) => i + 1), "every event once, in order");
  const reply = await stream.finalMessage();
  assert.equal(events.filter((e) => e.event === "message.delta").map((e) => e.data.delta).join(""), reply.content);
  assert.ok(reply.usage.costUsdMicros > 0);
});

test("chat: an in-band error event is the typed error", async () => {
  const { sdk } = client();
  const stream = sdk.chat.streamMessage(await session(), { content: "[[unsafe]] tell me" });
  const events = [];
  const error = await rejection((async () => {
    for await (const event of stream) events.push(event);
  })());
  assert.ok(error instanceof ModerationBlockedError, String(error));
  assert.equal(error.details.stage, "output_content");
  assert.equal(error.requestId, stream.requestId);
  assert.deepEqual(events.map((e) => e.event), ["message.started"]);
  assert.ok((await rejection(stream.finalMessage())) instanceof ModerationBlockedError);
});

test("chat: abort() stops the stream", async () => {
  const { sdk } = client();
  const stream = sdk.chat.streamMessage(await session(), { content: "Tell me a long story about ships." });
  const error = await rejection((async () => {
    for await (const event of stream) if (event.event === "message.delta") stream.abort();
  })());
  assert.ok(error instanceof APIUserAbortError, String(error));
});

test("chat: leaving the loop at message.completed still gives finalMessage", async () => {
  const { sdk } = client();
  const stream = sdk.chat.streamMessage(await session(), { content: "One word for the sea?" });
  for await (const event of stream) if (event.event === "message.completed") break;
  assert.ok((await stream.finalMessage()).content);
});

test("personas: streamCreate reports each step, then the persona", async () => {
  const { sdk } = client();
  const stream = sdk.personas.streamCreate({ intent: "A wistful clockmaker who repairs music boxes" });
  assert.ok(stream instanceof PersonaStream);
  const events = [];
  for await (const event of stream) events.push(event);
  const progress = events.slice(0, -1).map((e) => [e.event, e.data.step]);
  assert.deepEqual(progress, [["run.started", ""], ...STEPS.flatMap((s) => [["step.started", s], ["step.completed", s]])]);
  assert.deepEqual(sequence(events, stream.runId), events.map((_, i) => i + 1));
  const persona = await stream.finalPersona();
  assert.equal(events.at(-1).event, "persona");
  assert.equal(persona.state, "active");
  assert.equal(persona.lastRunId, events[0].data.runId);
  assert.deepEqual(await sdk.personas.get(persona.id), persona);
});

test("personas: a stream resumes from a given event id (lastEventId)", async () => {
  const { sdk, calls } = client();
  const first = sdk.personas.streamCreate({ intent: "A patient beekeeper who tells tall tales" });
  await first.done();
  const replay = sdk.personas.streamCreate({ intent: "ignored on resume" }, { lastEventId: `${first.runId}.9` });
  const events = [];
  for await (const event of replay) events.push(event);
  assert.equal(calls.at(-1).headers.get("last-event-id"), `${first.runId}.9`);
  assert.deepEqual(events.map((e) => e.id), [10, 11, 12].map((n) => `${first.runId}.${n}`));
  assert.equal((await replay.finalPersona()).id, (await first.finalPersona()).id);
});

test("completions: OpenAI-style chunks until [DONE]", async () => {
  const { sdk } = client();
  const stream = sdk.openai.streamChatCompletion({
    model: `persona://${personaId}`,
    messages: [{ role: "user", content: "Say hello." }],
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length > 1);
  assert.ok(chunks.every((c) => c.event === "chunk" && c.data.object === "chat.completion.chunk"));
  assert.equal(stream.status, "completed");
  assert.ok(stream.text.length > 0);
});
