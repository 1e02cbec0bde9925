// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
import { errorOfObject } from "./decode.js";
import { APIConnectionError, APIUserAbortError, PersonaError, StreamLostError } from "./errors.js";
import { readFrames } from "./sse.js";
function sleep(ms, signal) {
    return new Promise((resolve) => {
        const done = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resolve();
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener("abort", done, { once: true });
    });
}
export class EventStream {
    runId;
    requestId;
    lastEventId;
    status;
    response;
    resumes = 0;
    #open;
    #maxResumes;
    #resumeDelayMs;
    #controller = new AbortController();
    #started = false;
    #finished;
    #settle;
    constructor(open, options = {}) {
        this.#open = open;
        this.#maxResumes = options.maxResumes ?? 3;
        this.#resumeDelayMs = options.resumeDelayMs ?? 500;
        this.lastEventId = options.lastEventId;
        const signal = options.signal;
        if (signal?.aborted)
            this.#controller.abort();
        else
            signal?.addEventListener("abort", () => this.#controller.abort(), { once: true });
        this.#finished = new Promise((resolve, reject) => {
            this.#settle = (error) => (error === undefined ? resolve() : reject(error));
        });
        this.#finished.catch(() => undefined);
    }
    abort() {
        this.#controller.abort();
    }
    async done() {
        if (!this.#started) {
            for await (const _ of this) {
            }
        }
        return this.#finished;
    }
    [Symbol.asyncIterator]() {
        if (this.#started)
            throw new Error("An event stream can be iterated only once.");
        this.#started = true;
        return this.#run();
    }
    decode(frame) {
        return frame;
    }
    async *#run() {
        const signal = this.#controller.signal;
        let failure;
        try {
            let response = await this.#open(this.lastEventId, signal);
            this.#opened(response);
            let drops = 0;
            for (;;) {
                if (!response.body)
                    throw new APIConnectionError("The stream answered without a body.");
                const frames = readFrames(response.body);
                let dropped;
                try {
                    for (;;) {
                        let next;
                        try {
                            next = await frames.next();
                        }
                        catch (error) {
                            dropped = error;
                            break;
                        }
                        if (next.done)
                            break;
                        if (signal.aborted)
                            throw new APIUserAbortError("The stream was aborted.");
                        const frame = next.value;
                        if (frame.id) {
                            this.lastEventId = frame.id;
                            drops = 0;
                        }
                        if (this.#ended(frame))
                            return;
                        if (frame.event === "error") {
                            const data = json(frame);
                            throw errorOfObject(data.error, response.headers, this.requestId);
                        }
                        const event = this.decode(frame);
                        if (event !== undefined)
                            yield event;
                    }
                }
                finally {
                    await frames.return(undefined);
                }
                if (signal.aborted)
                    throw new APIUserAbortError("The stream was aborted.");
                if (this.lastEventId === undefined || drops >= this.#maxResumes) {
                    throw new APIConnectionError(this.lastEventId === undefined
                        ? "The stream dropped before its first event; it cannot be resumed."
                        : `The stream dropped ${drops + 1} times in a row; giving up (last event ${this.lastEventId}).`, dropped);
                }
                drops += 1;
                this.resumes += 1;
                await sleep(this.#resumeDelayMs * drops, signal);
                if (signal.aborted)
                    throw new APIUserAbortError("The stream was aborted.");
                response = await this.#open(this.lastEventId, signal);
            }
        }
        catch (error) {
            failure = error;
            throw error;
        }
        finally {
            this.#settle(failure ?? (this.status === undefined ? new APIUserAbortError("The stream was left before its end.") : undefined));
        }
    }
    #opened(response) {
        this.response = response;
        this.runId = response.headers.get("x-run-id") ?? undefined;
        this.requestId = response.headers.get("x-request-id") ?? undefined;
    }
    #ended(frame) {
        if (frame.data === "[DONE]") {
            this.status = "completed";
            return true;
        }
        if (frame.event !== "end")
            return false;
        const end = json(frame);
        this.runId ??= end.runId;
        this.status = end.status ?? "completed";
        if (this.status === "lost") {
            throw new StreamLostError(this.runId ?? "", this.requestId, this.response?.headers ?? new Headers());
        }
        if (this.status === "failed") {
            throw new PersonaError({ status: 200, code: "internal_error", message: `Run ${this.runId} failed.`,
                details: { runId: this.runId }, requestId: this.requestId, headers: this.response?.headers ?? new Headers() });
        }
        return true;
    }
}
async function settled(stream) {
    try {
        await stream.done();
        return undefined;
    }
    catch (error) {
        return error;
    }
}
function json(frame) {
    return frame.data === "" ? {} : JSON.parse(frame.data);
}
function parse(frame, name) {
    return { event: name, id: frame.id, data: json(frame) };
}
function known(frame, events) {
    return frame.data !== "" && events.has(frame.event);
}
const CHAT_EVENTS = new Set(["message.started", "message.delta", "message.completed"]);
export class ChatMessageStream extends EventStream {
    #completed;
    #text = "";
    decode(frame) {
        if (!known(frame, CHAT_EVENTS))
            return undefined;
        const event = parse(frame, frame.event);
        if (event.event === "message.delta")
            this.#text += event.data.delta;
        if (event.event === "message.completed")
            this.#completed = event.data;
        return event;
    }
    async finalEvent() {
        const error = await settled(this);
        if (this.#completed)
            return this.#completed;
        throw error ?? new APIConnectionError("The stream ended without `message.completed`.");
    }
    async finalMessage() {
        return (await this.finalEvent()).reply;
    }
    get text() {
        return this.#text;
    }
}
const PERSONA_EVENTS = new Set(["run.started", "step.started", "step.completed", "persona"]);
export class PersonaStream extends EventStream {
    #persona;
    decode(frame) {
        if (!known(frame, PERSONA_EVENTS))
            return undefined;
        const event = parse(frame, frame.event);
        if (event.event === "persona")
            this.#persona = event.data.persona;
        return event;
    }
    async finalPersona() {
        const error = await settled(this);
        if (this.#persona)
            return this.#persona;
        throw error ?? new APIConnectionError("The stream ended without `persona`.");
    }
}
export class ChatCompletionStream extends EventStream {
    #text = "";
    decode(frame) {
        if (frame.data === "")
            return undefined;
        const event = parse(frame, "chunk");
        for (const choice of event.data.choices ?? [])
            this.#text += choice.delta?.content ?? "";
        return event;
    }
    get text() {
        return this.#text;
    }
}
