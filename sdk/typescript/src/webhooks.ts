/**
 * Webhook signatures (`@persona-service/sdk/webhooks`): deliveries carry
 * `X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`,
 * keyed with the endpoint's whole secret string (`whsec_…`, UTF-8), one `v1`
 * per valid secret while a rotated secret is in its grace period. The same
 * rules as the server's `persona_service.webhooks.verify_signature`.
 */
import { webCrypto } from "./crypto.js";
import type { Event } from "./generated.js";

/** The delivery header that carries the signature. */
export const SIGNATURE_HEADER = "X-Service-Signature";
/** How far the signature's timestamp may be from now (seconds) by default. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyOptions {
  /** Maximum distance between `t` and now, in seconds (default 300); null: no timestamp check. */
  toleranceSeconds?: number | null;
  /** Now, as Unix seconds or a Date (default: the current time). */
  now?: number | Date;
}

/** Why a delivery was refused. */
export type WebhookFailure = "missing_header" | "no_signature" | "bad_timestamp" | "timestamp_out_of_tolerance"
  | "no_secret" | "signature_mismatch";

/** Thrown by `constructEvent` for a delivery whose signature does not verify. */
export class WebhookVerificationError extends Error {
  readonly reason: WebhookFailure;

  constructor(reason: WebhookFailure) {
    super(`Webhook signature verification failed: ${reason.replaceAll("_", " ")}.`);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

const encoder = new TextEncoder();

function bytes(payload: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof payload === "string") return encoder.encode(payload);
  return payload instanceof Uint8Array ? payload : new Uint8Array(payload);
}

async function hmacHex(secret: string, message: Uint8Array<ArrayBuffer>): Promise<string> {
  const { subtle } = await webCrypto();
  const key = await subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await subtle.sign("HMAC", key, message));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

function signedContent(payload: Uint8Array, timestamp: number): Uint8Array<ArrayBuffer> {
  const prefix = encoder.encode(`${timestamp}.`);
  const message = new Uint8Array(prefix.length + payload.length);
  message.set(prefix);
  message.set(payload, prefix.length);
  return message;
}

/** Equal strings, in a time that depends only on the expected one's length. */
function constantTimeEqual(expected: string, candidate: string): boolean {
  let diff = expected.length ^ candidate.length;
  for (let i = 0; i < expected.length; i++) {
    diff |= expected.charCodeAt(i) ^ (i < candidate.length ? candidate.charCodeAt(i) : 0);
  }
  return diff === 0;
}

async function check(payload: string | Uint8Array | ArrayBuffer, header: string | null | undefined,
                     secrets: string | readonly string[], options: VerifyOptions): Promise<WebhookFailure | undefined> {
  const keys = typeof secrets === "string" ? [secrets] : [...secrets];
  if (!header) return "missing_header";
  if (keys.length === 0) return "no_secret";
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const field = part.trim();
    const at = field.indexOf("=");
    if (at < 0) continue;
    const name = field.slice(0, at);
    const value = field.slice(at + 1);
    if (name === "t") {
      if (!/^\s*[+-]?\d+\s*$/.test(value)) return "bad_timestamp";
      timestamp = Number.parseInt(value, 10);
    } else if (name === "v1") {
      signatures.push(value);
    }
  }
  if (timestamp === undefined || signatures.length === 0) return "no_signature";
  const now = options.now instanceof Date ? options.now.getTime() / 1000 : options.now ?? Date.now() / 1000;
  const tolerance = options.toleranceSeconds === undefined ? DEFAULT_TOLERANCE_SECONDS : options.toleranceSeconds;
  if (tolerance !== null && Math.abs(now - timestamp) > tolerance) return "timestamp_out_of_tolerance";
  const message = signedContent(bytes(payload), timestamp);
  let matched = false;
  for (const secret of keys) {
    const expected = await hmacHex(secret, message);
    // No early exit: the time taken does not depend on which secret or signature matched.
    for (const candidate of signatures) matched = constantTimeEqual(expected, candidate) || matched;
  }
  return matched ? undefined : "signature_mismatch";
}

/**
 * True when `header` (the `X-Service-Signature` value) carries a `v1`
 * signature of `payload` under one of `secrets` and its `t` is within
 * `toleranceSeconds` of now. `payload` must be the raw request body, byte
 * for byte (not re-serialized JSON). Pass the current and the previous
 * secret during a rotation.
 */
export async function verifyWebhook(payload: string | Uint8Array | ArrayBuffer, header: string | null | undefined,
                                    secrets: string | readonly string[], options: VerifyOptions = {}): Promise<boolean> {
  return (await check(payload, header, secrets, options)) === undefined;
}

/** Verifies a delivery (as `verifyWebhook`) and returns its event; throws `WebhookVerificationError` if it does not verify. */
export async function constructEvent<T = Event>(payload: string | Uint8Array | ArrayBuffer,
                                                header: string | null | undefined, secrets: string | readonly string[],
                                                options: VerifyOptions = {}): Promise<T> {
  const failure = await check(payload, header, secrets, options);
  if (failure !== undefined) throw new WebhookVerificationError(failure);
  const text = typeof payload === "string" ? payload : new TextDecoder().decode(bytes(payload));
  return JSON.parse(text) as T;
}

/** The `X-Service-Signature` value the server would send (for tests of a receiver). */
export async function signWebhook(payload: string | Uint8Array | ArrayBuffer, secrets: string | readonly string[],
                                  timestamp: number = Math.floor(Date.now() / 1000)): Promise<string> {
  const message = signedContent(bytes(payload), Math.trunc(timestamp));
  const keys = typeof secrets === "string" ? [secrets] : secrets;
  const parts = [`t=${Math.trunc(timestamp)}`];
  for (const secret of keys) parts.push(`v1=${await hmacHex(secret, message)}`);
  return parts.join(",");
}
