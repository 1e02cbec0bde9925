// A webhook receiver that trusts only deliveries whose signature verifies (TypeScript SDK).
//
//   cd examples/typescript && PERSONA_WEBHOOK_SECRET=whsec_… npm run receiver -- --port 9999
//
// Point an endpoint at http://127.0.0.1:9999/hooks (the service delivers to a local http
// address only with PERSONA_ENV=development). `--exit-after N`: stop after N verified events.
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { SIGNATURE_HEADER, WebhookVerificationError, constructEvent } from "@persona-service/sdk/webhooks";

const secret = process.env.PERSONA_WEBHOOK_SECRET; // the endpoint's `secret`, shown once when it was created
if (!secret) throw new Error("set PERSONA_WEBHOOK_SECRET to the endpoint's secret (whsec_…)");
const { values } = parseArgs({ options: { port: { type: "string", default: "9999" }, "exit-after": { type: "string" } } });
let left = Number(values["exit-after"] ?? Infinity);

const server = createServer(async (request, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks); // the raw bytes, as signed
  try {
    const event = await constructEvent(body, request.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined, secret);
    console.log("verified", event.type, event.id, JSON.stringify(event.data)); // dedupe on event.id: at least once
    response.writeHead(204).end(); // any 2xx acknowledges the delivery
    if (--left <= 0) server.close();
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error;
    console.log("rejected:", error.reason);
    response.writeHead(400).end(); // not acknowledged: never trusted
  }
});
server.listen(Number(values.port), "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${values.port}/hooks`));
