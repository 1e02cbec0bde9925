export { PersonaClient } from "./client.js";
export { APIPromise, Core, retryAfterMs } from "./core.js";
export type { ClientOptions, Fetch, PageItem, RequestOptions, RequestSpec } from "./core.js";
export {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIUserAbortError,
  PersonaError,
  StreamLostError,
} from "./errors.js";
export type { PersonaErrorInit } from "./errors.js";
export * from "./generated.js";
export { readFrames } from "./sse.js";
export { ChatCompletionStream, ChatMessageStream, EventStream, PersonaStream } from "./streaming.js";
export type {
  ChatCompletionChunk,
  ChatCompletionStreamEvent,
  ChatMessageCompleted,
  ChatMessageDelta,
  ChatMessageStarted,
  ChatStreamEvent,
  EventStreamOptions,
  PersonaStreamEvent,
  PipelinePersona,
  PipelineProgress,
  RunStatus,
  SseFrame,
  StreamEvent,
  StreamOpener,
} from "./streaming.js";
export {
  constructEvent,
  DEFAULT_TOLERANCE_SECONDS,
  SIGNATURE_HEADER,
  signWebhook,
  verifyWebhook,
  WebhookVerificationError,
} from "./webhooks.js";
export type { VerifyOptions, WebhookFailure } from "./webhooks.js";
