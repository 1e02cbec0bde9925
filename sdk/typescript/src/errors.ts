import type { ErrorCode } from "./generated.js";

/** What an error answer carried. */
export interface PersonaErrorInit {
  status: number;
  code: ErrorCode | (string & {});
  message: string;
  details?: Record<string, unknown>;
  requestId?: string | undefined;
  headers?: Headers;
  cause?: unknown;
}

/**
 * An error from the API (`{"error": {"code", "message", "details"}}`) or on
 * the way to it. Each catalogue code has its own subclass (`RateLimitedError`,
 * `ProviderError`, `ValidationFailedError`, …), so `instanceof` or `code`
 * both work.
 */
export class PersonaError extends Error {
  /** HTTP status (0 when no response arrived). */
  readonly status: number;
  /** The catalogue code (`rate_limited`, `validation_failed`, …). */
  readonly code: ErrorCode | (string & {});
  /** Code-specific fields (`validationErrors`, `retryAfter`, `conflictField`, …); `{}` when none. */
  readonly details: Record<string, unknown>;
  /** The `x-request-id` of the failed response: quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** The response headers (empty when no response arrived). */
  readonly headers: Headers;

  constructor(init: PersonaErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? {};
    this.requestId = init.requestId;
    this.headers = init.headers ?? new Headers();
  }
}

/** No response: the connection failed (refused, reset, DNS, …). */
export class APIConnectionError extends PersonaError {
  constructor(message = "Connection error.", cause?: unknown, code = "connection_error") {
    super({ status: 0, code, message, cause });
  }
}

/** No response within `timeoutMs`. */
export class APIConnectionTimeoutError extends APIConnectionError {
  constructor(message = "Request timed out.", cause?: unknown) {
    super(message, cause, "connection_timeout");
  }
}

/** The caller's `AbortSignal` cancelled the request. */
export class APIUserAbortError extends PersonaError {
  constructor(message = "Request was aborted.") {
    super({ status: 0, code: "aborted", message });
  }
}

/**
 * A stream's run ended `lost` (`end` with status `lost`): no server process could finish it (none did in 5
 * attempts, or a reply taken over could not go on from the text already sent). Nothing of it was committed.
 */
export class StreamLostError extends PersonaError {
  constructor(runId: string, requestId: string | undefined, headers: Headers) {
    super({ status: 200, code: "stream_lost",
      message: `Stream ${runId} was lost: no server process could finish it; nothing of it was committed.`,
      details: { runId }, requestId, headers });
  }
}
