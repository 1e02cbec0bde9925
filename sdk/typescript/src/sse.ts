/** One server-sent event as it came over the wire. */
export interface SseFrame {
  /** The frame's `id:` (`<run id>.<seq>`), or "" when it had none (the final `end`). */
  id: string;
  /** The frame's `event:`, "message" when it had none (OpenAI-style chunks). */
  event: string;
  /** The `data:` lines, joined with "\n". */
  data: string;
}

const LINE_END = /\r\n|\r|\n/;

/**
 * The frames of a `text/event-stream` body, as they arrive (the WHATWG
 * framing: `field: value` lines, a blank line ends a frame, `:` comments).
 * A frame cut off by the end of the body is dropped, never half-delivered.
 * Read errors propagate; leaving the loop early cancels the body.
 */
export async function* readFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | undefined;
  let event = "";
  let data: string[] = [];
  let finished = false;
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) {
        finished = true;
        buffer += decoder.decode();
      } else {
        buffer += decoder.decode(chunk.value, { stream: true });
      }
      for (;;) {
        const match = LINE_END.exec(buffer);
        // A trailing "\r" may be the first half of "\r\n": wait for the next chunk.
        if (!match || (!finished && match[0] === "\r" && match.index === buffer.length - 1)) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (data.length > 0) yield { id: id ?? "", event: event || "message", data: data.join("\n") };
          id = undefined;
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (name === "data") data.push(value);
        else if (name === "event") event = value;
        else if (name === "id" && !value.includes("\0")) id = value;
      }
      if (finished) return;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
