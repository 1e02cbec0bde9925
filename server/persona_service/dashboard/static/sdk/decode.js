// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { PersonaError } from "./errors.js";
import { ERROR_CLASSES, ERROR_STATUS } from "./generated.js";
function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}
const CODE_OF_STATUS = new Map();
for (const [code, status] of Object.entries(ERROR_STATUS)) {
    CODE_OF_STATUS.set(status, CODE_OF_STATUS.has(status) ? "" : code);
}
export function errorOf(status, code, message, details, headers, requestId) {
    const Class = ERROR_CLASSES[code] ?? PersonaError;
    return new Class({ status, code, message, details, requestId: requestId ?? headers.get("x-request-id") ?? undefined,
        headers });
}
export function errorOfObject(error, headers, requestId) {
    const e = isObject(error) ? error : {};
    const code = typeof e.code === "string" ? e.code : "internal_error";
    const status = ERROR_STATUS[code] ?? 500;
    return errorOf(status, code, typeof e.message === "string" ? e.message : code, isObject(e.details) ? e.details : {}, headers, requestId);
}
export function errorOfResponse(status, text, headers) {
    let body;
    try {
        body = text ? JSON.parse(text) : undefined;
    }
    catch {
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
            const details = typeof body.scimType === "string" ? { scimType: body.scimType } : {};
            return errorOf(status, fallback, body.detail, details, headers);
        }
    }
    const snippet = text.trim().slice(0, 200);
    return errorOf(status, fallback, snippet ? `HTTP ${status}: ${snippet}` : `HTTP ${status}`, {}, headers);
}
