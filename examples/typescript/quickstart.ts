// The TypeScript SDK's first steps: a persona, a chat session, a reply streamed as it is
// written (with its usage and cost), the events the service recorded and a typed error.
//
//   cd examples/typescript && PERSONA_API_KEY=sk_… npm start
import { PersonaClient, ValidationFailedError } from "@persona-service/sdk";

const client = new PersonaClient({
  apiKey: process.env.PERSONA_API_KEY,
  baseUrl: process.env.PERSONA_BASE_URL ?? "http://127.0.0.1:8080",
});

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
