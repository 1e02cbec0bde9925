// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
export { PersonaClient } from "./client.js";
export { APIPromise, Core, retryAfterMs } from "./core.js";
export { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError, PersonaError, StreamLostError, } from "./errors.js";
export * from "./generated.js";
export { readFrames } from "./sse.js";
export { ChatCompletionStream, ChatMessageStream, EventStream, PersonaStream } from "./streaming.js";
export { constructEvent, DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER, signWebhook, verifyWebhook, WebhookVerificationError, } from "./webhooks.js";
