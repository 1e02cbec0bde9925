// Compiled (never run) by tests/sdk/test_typescript_sdk.py against the built
// package (dist/*.d.ts through the package's "exports"): what a TypeScript
// caller writes must type-check, and the mistakes marked below must not.
import {
  PersonaClient,
  PersonaError,
  RateLimitedError,
  type ChatMessageCompleted,
  type ErrorCode,
  type Persona,
  type PersonaStreamEvent,
} from "@persona-service/sdk";
import { constructEvent, verifyWebhook, WebhookVerificationError } from "@persona-service/sdk/webhooks";

const client = new PersonaClient({
  apiKey: "sk_live_x",
  baseUrl: "http://127.0.0.1:8080",
  maxRetries: 3,
  backoffBaseMs: 1000,
  timeoutMs: 30_000,
  fetch: (input, init) => fetch(input, init),
});

export async function usage(): Promise<void> {
  const persona: Persona = await client.personas.create({ intent: "A patient gardener", visibility: "org" });
  // What an answer always carries is required (the document's `required` lists): no `!`, no `?? ""`.
  const { data, response } = await client.personas.get(persona.id).withResponse();
  const state: string = data.state;
  // @ts-expect-error: `auditScore` is absent before the first audit
  const score: number = data.auditScore;
  const replayed: string | null = response.headers.get("idempotent-replayed");
  await client.personas.archive("p1");
  await client.personas.update("p1", { displayName: "Ada" }, { idempotencyKey: "k1", timeoutMs: 5000 });
  // @ts-expect-error: `intent` is required
  await client.personas.create({});
  // @ts-expect-error: `visibility` is one of private, org, public
  await client.personas.create({ intent: "x", visibility: "everyone" });
  // @ts-expect-error: the path parameter comes first
  await client.chat.sendMessage({ content: "hi" });

  for await (const event of client.events.listIter({ limit: 50, type: "persona.created" })) {
    const type: string | undefined = event.type;
    void type;
  }
  for await (const endpoint of client.paginate((p) => client.webhooks.list(p), { limit: 20 })) {
    const url: string | undefined = endpoint.url;
    void url;
  }

  const stream = client.chat.streamMessage("chs_1", { content: "Hello" });
  for await (const event of stream) {
    if (event.event === "message.delta") {
      const delta: string = event.data.delta;
      void delta;
    }
    // @ts-expect-error: only message.completed carries the reply
    void event.data.reply;
  }
  const reply = await stream.finalMessage();
  const cost: number | undefined = reply.usage.costUsdMicros;
  const completed: ChatMessageCompleted = await stream.finalEvent();

  const generation = client.personas.streamCreate({ intent: "A wistful clockmaker" });
  for await (const event of generation as AsyncIterable<PersonaStreamEvent>) {
    if (event.event === "step.completed") {
      const ms: number = event.data.durationMs;
      void ms;
    }
  }
  const made: Persona = await generation.finalPersona();

  try {
    const session = await client.chat.createSession({ personaId: made.id });
    const { reply } = await client.chat.sendMessage(session.sessionId, { content: "Hi" });
    const micros: number = reply.usage.costUsdMicros;
    void micros;
  } catch (error) {
    if (error instanceof RateLimitedError) {
      const code: ErrorCode | string = error.code;
      const id: string | undefined = error.requestId;
      void [code, id, error.details.retryAfter, error.headers.get("retry-after")];
    } else if (error instanceof PersonaError) {
      const status: number = error.status;
      void status;
    }
  }

  const metrics: Response = await client.probes.getMetrics();
  const ok: boolean = await verifyWebhook("{}", "t=1,v1=00", ["whsec_a", "whsec_b"], { toleranceSeconds: 300, now: 1 });
  try {
    const event = await constructEvent("{}", "t=1,v1=00", "whsec_a");
    void event.type;
  } catch (error) {
    if (error instanceof WebhookVerificationError) void error.reason;
  }
  void [state, score, replayed, cost, completed, metrics, ok];
}
