// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
let cached;
export function webCrypto() {
    cached ??= (async () => {
        const global = globalThis.crypto;
        if (global)
            return global;
        const specifier = "node:crypto";
        const mod = (await import(specifier));
        return mod.webcrypto;
    })();
    return cached;
}
export async function randomUUID() {
    const crypto = await webCrypto();
    if (typeof crypto.randomUUID === "function")
        return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
