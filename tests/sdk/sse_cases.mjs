// Feeds every case of tests/sdk/sse_cases.json through the TypeScript SDK's parser
// (readFrames of sdk/typescript/src/sse.ts, transpiled here as tsc builds it) and prints
// what it delivered, per case and chunking, as JSON for tests/sdk/test_sse_contract.py.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const root = new URL("../../", import.meta.url);
const ts = createRequire(import.meta.url)(new URL("node_modules/typescript", root).pathname);
const source = readFileSync(new URL("sdk/typescript/src/sse.ts", root), "utf8");
const { outputText } = ts.transpileModule(source, {
  compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
});
const { readFrames } = await import(`data:text/javascript;base64,${Buffer.from(outputText).toString("base64")}`);

const bytesOf = (chunk) =>
  typeof chunk === "string" ? new TextEncoder().encode(chunk) : Uint8Array.from(Buffer.from(chunk.hex.replaceAll(" ", ""), "hex"));

/** The same chunkings as the Python test: as given, whole, one byte at a time. */
function chunkings(chunks) {
  const given = chunks.map(bytesOf);
  const whole = Uint8Array.from(given.flatMap((b) => [...b]));
  return { given, whole: whole.length ? [whole] : [], bytes: [...whole].map((b) => Uint8Array.of(b)) };
}

/** A body that hands out the chunks one read at a time, then ends or fails. */
function body(chunks, end) {
  let next = 0;
  return new ReadableStream({
    pull(controller) {
      if (next < chunks.length) controller.enqueue(chunks[next++]);
      else if (end === "broken") controller.error(new TypeError("terminated"));
      else controller.close();
    },
  });
}

const results = {};
for (const { name, chunks, end } of JSON.parse(readFileSync(process.argv[2], "utf8")).cases) {
  results[name] = {};
  for (const [how, pieces] of Object.entries(chunkings(chunks))) {
    const frames = [];
    let error = null;
    try {
      for await (const frame of readFrames(body(pieces, end))) frames.push(frame);
    } catch (e) {
      error = String(e);
    }
    results[name][how] = { frames, resume: frames.at(-1)?.id ?? "", broke: error !== null };
  }
}
process.stdout.write(JSON.stringify(results));
