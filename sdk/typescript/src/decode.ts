import { PersonaError } from "./errors.js";
import { ERROR_CLASSES, ERROR_STATUS, type ErrorCode } from "./generated.js";

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// A status that only one catalogue code uses names that code when a body has none (a proxy's page).
const CODE_OF_STATUS = new Map<number, string>();
for (const [code, status] of Object.entries(ERROR_STATUS)) {
  CODE_OF_STATUS.set(status, CODE_OF_STATUS.has(status) ? "" : code);
}

/** The typed error of a code, with the rest of what the answer carried. */
export function errorOf(status: number, code: string, message: string, details: Json,
                        headers: Headers, requestId?: string | undefined): PersonaError {
  const Class = ERROR_CLASSES[code as ErrorCode] ?? PersonaError;
  return new Class({ status, code, message, details, requestId: requestId ?? headers.get("x-request-id") ?? undefined,
    headers });
}

/** The error of an in-band stream `error` event (`{"code", "message", "details"}`). */
export function errorOfObject(error: unknown, headers: Headers, requestId?: string): PersonaError {
  const e = isObject(error) ? error : {};
  const code = typeof e.code === "string" ? e.code : "internal_error";
  const status = ERROR_STATUS[code as ErrorCode] ?? 500;
  return errorOf(status, code, typeof e.message === "string" ? e.message : code, isObject(e.details) ? e.details : {},
    headers, requestId);
}

/**
 * The error of a failed response, whatever its shape: the envelope
 * `{"error": {"code", "message", "details"}}`, the portrait edit's
 * `{"error": "<code>", "message", …details}`, SCIM's `{"schemas", "status",
 * "detail", "scimType"}`, or a body that is none of these.
 */
export function errorOfResponse(status: number, text: string, headers: Headers): PersonaError {
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  const fallback = CODE_OF_STATUS.get(status) || `http_${status}`;
  if (isObject(body)) {
    const error = body.error;
    if (isObject(error) && typeof error.code === "string") {
      const message = typeof error.message === "string" ? error.message : error.code;
      return errorOf(status, error.code, message, isObject(error.details) ? error.details : {}, headers);
    }
    if (typeof error === "string") {
      const { error: code, message, ...details } = body;
      return errorOf(status, String(code), typeof message === "string" ? message : String(code), details, headers);
    }
    if (Array.isArray(body.schemas) && typeof body.detail === "string") {
      const details: Json = typeof body.scimType === "string" ? { scimType: body.scimType } : {};
      return errorOf(status, fallback, body.detail, details, headers);
    }
  }
  const snippet = text.trim().slice(0, 200);
  return errorOf(status, fallback, snippet ? `HTTP ${status}: ${snippet}` : `HTTP ${status}`, {}, headers);
}
