/** One server-sent event as it came over the wire. */
export interface SseFrame {
  /** The last event id so far (`<run id>.<seq>`): the frame's `id:` or an earlier frame's (WHATWG), "" before any. */
  id: string;
  /** The frame's `event:`, "message" when it had none (OpenAI-style chunks). */
  event: string;
  /** The `data:` lines, joined with "\n". */
  data: string;
}

const LINE_END = /\r\n|\r|\n/;

/**
 * The frames of a `text/event-stream` body, as they arrive (the WHATWG
 * framing: UTF-8, `field: value` lines ended by LF, CRLF or CR, a blank line
 * ends a frame, `:` comments, `id:` carries over to later frames).
 * The one parser of the SDK (and of the dashboard, which runs on this build),
 * held to tests/sdk/sse_cases.json with the Python SDK's:
 * - a frame without `data:` (only an `id:` or an `event:`) is delivered, with
 *   data "", so its id still counts for a resume;
 * - a frame is delivered only at its blank line: one still open when the body
 *   ends (cleanly or not) is dropped, never half-delivered, and its id is not
 *   the resume point (a resume from the last delivered id gets it whole).
 * Read errors propagate; leaving the loop early cancels the body.
 */
export async function* readFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id = "";
  let event = "";
  let data: string[] = [];
  let fields = false; // the frame has had a field line
  let afterCR = false; // the last text ended with CR: an LF starting the next is the same line end
  let finished = false;
  try {
    for (;;) {
      const chunk = await reader.read();
      finished = chunk.done;
      let text = chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      if (text !== "") {
        // A CR ends its line at once (the frame it completes is not held back for the next read).
        if (afterCR && text.startsWith("\n")) text = text.slice(1);
        afterCR = text.endsWith("\r");
        buffer += text;
      }
      for (;;) {
        const match = LINE_END.exec(buffer);
        if (!match) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (fields) yield { id, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          fields = false;
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
        else continue; // `retry:` and unknown fields
        fields = true;
      }
      if (finished) return; // a frame without its blank line is incomplete
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
