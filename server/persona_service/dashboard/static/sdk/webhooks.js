// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { webCrypto } from "./crypto.js";
export const SIGNATURE_HEADER = "X-Service-Signature";
export const DEFAULT_TOLERANCE_SECONDS = 300;
export class WebhookVerificationError extends Error {
    reason;
    constructor(reason) {
        super(`Webhook signature verification failed: ${reason.replaceAll("_", " ")}.`);
        this.name = "WebhookVerificationError";
        this.reason = reason;
    }
}
const encoder = new TextEncoder();
function bytes(payload) {
    if (typeof payload === "string")
        return encoder.encode(payload);
    return payload instanceof Uint8Array ? payload : new Uint8Array(payload);
}
async function hmacHex(secret, message) {
    const { subtle } = await webCrypto();
    const key = await subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const mac = new Uint8Array(await subtle.sign("HMAC", key, message));
    return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}
function signedContent(payload, timestamp) {
    const prefix = encoder.encode(`${timestamp}.`);
    const message = new Uint8Array(prefix.length + payload.length);
    message.set(prefix);
    message.set(payload, prefix.length);
    return message;
}
function constantTimeEqual(expected, candidate) {
    let diff = expected.length ^ candidate.length;
    for (let i = 0; i < expected.length; i++) {
        diff |= expected.charCodeAt(i) ^ (i < candidate.length ? candidate.charCodeAt(i) : 0);
    }
    return diff === 0;
}
async function check(payload, header, secrets, options) {
    const keys = typeof secrets === "string" ? [secrets] : [...secrets];
    if (!header)
        return "missing_header";
    if (keys.length === 0)
        return "no_secret";
    let timestamp;
    const signatures = [];
    for (const part of header.split(",")) {
        const field = part.trim();
        const at = field.indexOf("=");
        if (at < 0)
            continue;
        const name = field.slice(0, at);
        const value = field.slice(at + 1);
        if (name === "t") {
            if (!/^\s*[+-]?\d+\s*$/.test(value))
                return "bad_timestamp";
            timestamp = Number.parseInt(value, 10);
        }
        else if (name === "v1") {
            signatures.push(value);
        }
    }
    if (timestamp === undefined || signatures.length === 0)
        return "no_signature";
    const now = options.now instanceof Date ? options.now.getTime() / 1000 : options.now ?? Date.now() / 1000;
    const tolerance = options.toleranceSeconds === undefined ? DEFAULT_TOLERANCE_SECONDS : options.toleranceSeconds;
    if (tolerance !== null && Math.abs(now - timestamp) > tolerance)
        return "timestamp_out_of_tolerance";
    const message = signedContent(bytes(payload), timestamp);
    let matched = false;
    for (const secret of keys) {
        const expected = await hmacHex(secret, message);
        for (const candidate of signatures)
            matched = constantTimeEqual(expected, candidate) || matched;
    }
    return matched ? undefined : "signature_mismatch";
}
export async function verifyWebhook(payload, header, secrets, options = {}) {
    return (await check(payload, header, secrets, options)) === undefined;
}
export async function constructEvent(payload, header, secrets, options = {}) {
    const failure = await check(payload, header, secrets, options);
    if (failure !== undefined)
        throw new WebhookVerificationError(failure);
    const text = typeof payload === "string" ? payload : new TextDecoder().decode(bytes(payload));
    return JSON.parse(text);
}
export async function signWebhook(payload, secrets, timestamp = Math.floor(Date.now() / 1000)) {
    const message = signedContent(bytes(payload), Math.trunc(timestamp));
    const keys = typeof secrets === "string" ? [secrets] : secrets;
    const parts = [`t=${Math.trunc(timestamp)}`];
    for (const secret of keys)
        parts.push(`v1=${await hmacHex(secret, message)}`);
    return parts.join(",");
}
