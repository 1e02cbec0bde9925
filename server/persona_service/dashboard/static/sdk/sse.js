// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
const LINE_END = /\r\n|\r|\n/;
export async function* readFrames(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let id = "";
    let event = "";
    let data = [];
    let fields = false;
    let afterCR = false;
    let finished = false;
    try {
        for (;;) {
            const chunk = await reader.read();
            finished = chunk.done;
            let text = chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
            if (text !== "") {
                if (afterCR && text.startsWith("\n"))
                    text = text.slice(1);
                afterCR = text.endsWith("\r");
                buffer += text;
            }
            for (;;) {
                const match = LINE_END.exec(buffer);
                if (!match)
                    break;
                const line = buffer.slice(0, match.index);
                buffer = buffer.slice(match.index + match[0].length);
                if (line === "") {
                    if (fields)
                        yield { id, event: event || "message", data: data.join("\n") };
                    event = "";
                    data = [];
                    fields = false;
                    continue;
                }
                if (line.startsWith(":"))
                    continue;
                const colon = line.indexOf(":");
                const name = colon < 0 ? line : line.slice(0, colon);
                let value = colon < 0 ? "" : line.slice(colon + 1);
                if (value.startsWith(" "))
                    value = value.slice(1);
                if (name === "data")
                    data.push(value);
                else if (name === "event")
                    event = value;
                else if (name === "id" && !value.includes("\0"))
                    id = value;
                else
                    continue;
                fields = true;
            }
            if (finished)
                return;
        }
    }
    finally {
        if (!finished)
            await reader.cancel().catch(() => undefined);
        reader.releaseLock();
    }
}
