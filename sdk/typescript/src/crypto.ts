let cached: Promise<Crypto> | undefined;

/**
 * Web Crypto: the global one (browsers, Node >= 19), else `node:crypto`'s
 * `webcrypto` (Node 18 has no global `crypto` without a flag). The module
 * name is a variable so bundlers for browsers leave it alone.
 */
export function webCrypto(): Promise<Crypto> {
  cached ??= (async () => {
    const global = (globalThis as { crypto?: Crypto }).crypto;
    if (global) return global;
    const specifier = "node:crypto";
    const mod = (await import(/* @vite-ignore */ /* webpackIgnore: true */ specifier)) as { webcrypto: Crypto };
    return mod.webcrypto;
  })();
  return cached;
}

/** A random (version 4) UUID. */
export async function randomUUID(): Promise<string> {
  const crypto = await webCrypto();
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // Browsers outside a secure context have getRandomValues but no randomUUID.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
