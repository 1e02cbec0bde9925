// The TypeScript SDK's first steps: a persona, a chat session, a reply streamed as it is
// written (with its usage and cost), the events the service recorded and a typed error.
//
//   cd examples/typescript && PERSONA_API_KEY=sk_… npm start
//
// It talks to http://127.0.0.1:$PERSONA_HTTP_PORT (8080 when unset), as the README's quick start
// does; PERSONA_BASE_URL points it at any other address.
import { PersonaClient, ValidationFailedError } from "@persona-service/sdk";

const baseUrl = process.env.PERSONA_BASE_URL || `http://127.0.0.1:${process.env.PERSONA_HTTP_PORT || 8080}`;
try { // nothing there: say so at once (the SDK would retry a refused connection for seconds first)
  await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(5000) });
} catch (error) {
  const reason = error instanceof Error ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ""}` : error;
  console.error(`no Persona Service answers at ${baseUrl} (${reason}); start it with \`make up\`, `
    + "or set PERSONA_HTTP_PORT (or PERSONA_BASE_URL) to where it listens");
  process.exit(1);
}

const client = new PersonaClient({ apiKey: process.env.PERSONA_API_KEY, baseUrl });

const persona = await client.personas.create({ intent: "A lighthouse keeper who collects weather proverbs" });
console.log(`persona ${persona.id}: ${persona.displayName} (${persona.state})`);

const session = await client.chat.createSession({ personaId: persona.id });
const stream = client.chat.streamMessage(session.sessionId, { content: "What does a red sky mean?" });
for await (const event of stream) {
  if (event.event === "message.delta") process.stdout.write(event.data.delta); // resumed if the connection drops
}
const { usage } = await stream.finalMessage();
console.log(`\n${usage.inputTokens} tokens in, ${usage.outputTokens} out, $${(usage.costUsdMicros / 1e6).toFixed(6)}`);

for await (const event of client.events.listIter({ type: "persona.created", limit: 5 })) {
  console.log("event", event.type, event.id);
}

try {
  await client.personas.create({ intent: "" });
} catch (error) {
  if (!(error instanceof ValidationFailedError)) throw error;
  console.log("refused:", error.code, error.message, "request", error.requestId); // every catalogue code has its class
}
