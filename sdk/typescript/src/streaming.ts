import { errorOfObject } from "./decode.js";
import { APIConnectionError, APIUserAbortError, PersonaError, StreamLostError } from "./errors.js";
import type { ChatMessage, ChatSession, ErrorObject, Persona } from "./generated.js";
import { readFrames, type SseFrame } from "./sse.js";

export type { SseFrame } from "./sse.js";

/** Opens (or, with `lastEventId`, resumes) the stream's request; errors are already typed. */
export type StreamOpener = (lastEventId: string | undefined, signal: AbortSignal) => Promise<Response>;

export interface EventStreamOptions {
  /** Resumes after consecutive drops before giving up (default 3). */
  maxResumes?: number;
  /** Wait before a resume, times the number of consecutive drops (default 500 ms). */
  resumeDelayMs?: number;
  /** Cancels the stream (as `abort()` does). */
  signal?: AbortSignal | undefined;
  /** Start by resuming a run after this event id instead of starting one. */
  lastEventId?: string | undefined;
}

/** A typed event: the frame's `event` name, its `id` and its JSON `data`. */
export interface StreamEvent<Name extends string, Data> {
  event: Name;
  /** `<run id>.<seq>`: pass it as `lastEventId` to resume from here. */
  id: string;
  data: Data;
}

/** How a run ended (`event: end`). */
export type RunStatus = "completed" | "failed" | "lost";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
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

/**
 * A server-sent event stream that is a view onto a durable run: iterate it
 * with `for await`. When the connection drops before the run's `end`, the
 * same request is sent again with `Last-Event-ID` (at most `maxResumes`
 * times in a row) and the iteration goes on from the next event, with
 * nothing repeated or missed. An in-band `error` event is thrown as its
 * typed error (`ModerationBlockedError`, …). Iterate it once.
 */
export class EventStream<E> implements AsyncIterable<E> {
  /** The run (response header `X-Run-Id`), once the stream has opened. */
  runId: string | undefined;
  /** `x-request-id` of the first response. */
  requestId: string | undefined;
  /** The id of the last event received (what a resume sends as `Last-Event-ID`). */
  lastEventId: string | undefined;
  /** How the run ended, once it has. */
  status: RunStatus | undefined;
  /** The first response (its headers: rate limits, run id, …). */
  response: Response | undefined;
  /** How many times the stream was resumed after a drop. */
  resumes = 0;

  readonly #open: StreamOpener;
  readonly #maxResumes: number;
  readonly #resumeDelayMs: number;
  readonly #controller = new AbortController();
  #started = false;
  readonly #finished: Promise<void>;
  #settle!: (error?: unknown) => void;

  constructor(open: StreamOpener, options: EventStreamOptions = {}) {
    this.#open = open;
    this.#maxResumes = options.maxResumes ?? 3;
    this.#resumeDelayMs = options.resumeDelayMs ?? 500;
    this.lastEventId = options.lastEventId;
    const signal = options.signal;
    if (signal?.aborted) this.#controller.abort();
    else signal?.addEventListener("abort", () => this.#controller.abort(), { once: true });
    this.#finished = new Promise<void>((resolve, reject) => {
      this.#settle = (error?: unknown) => (error === undefined ? resolve() : reject(error));
    });
    this.#finished.catch(() => undefined); // the iterator reports the error; this is for done()
  }

  /** Stops reading and closes the connection (the run itself goes on on the server). */
  abort(): void {
    this.#controller.abort();
  }

  /** Resolves when the run has ended (consuming the events if nobody iterates), or rejects with its error. */
  async done(): Promise<void> {
    if (!this.#started) {
      for await (const _ of this) {
        // drained for the final result
      }
    }
    return this.#finished;
  }

  [Symbol.asyncIterator](): AsyncIterator<E> {
    if (this.#started) throw new Error("An event stream can be iterated only once.");
    this.#started = true;
    return this.#run();
  }

  /** The typed event of a frame, or undefined to skip it (an event this SDK does not know). */
  protected decode(frame: SseFrame): E | undefined {
    return frame as unknown as E;
  }

  async *#run(): AsyncGenerator<E, void, undefined> {
    const signal = this.#controller.signal;
    let failure: unknown;
    try {
      let response = await this.#open(this.lastEventId, signal);
      this.#opened(response);
      let drops = 0;
      for (;;) {
        if (!response.body) throw new APIConnectionError("The stream answered without a body.");
        const frames = readFrames(response.body);
        let dropped: unknown;
        try {
          for (;;) {
            let next: IteratorResult<SseFrame>;
            try {
              next = await frames.next();
            } catch (error) {
              dropped = error;
              break;
            }
            if (next.done) break;
            // Frames already received are not delivered after abort().
            if (signal.aborted) throw new APIUserAbortError("The stream was aborted.");
            const frame = next.value;
            if (frame.id) {
              this.lastEventId = frame.id;
              drops = 0;
            }
            if (this.#ended(frame)) return;
            if (frame.event === "error") {
              const data = json(frame) as { error?: ErrorObject };
              throw errorOfObject(data.error, response.headers, this.requestId);
            }
            const event = this.decode(frame);
            if (event !== undefined) yield event;
          }
        } finally {
          await frames.return(undefined);
        }
        if (signal.aborted) throw new APIUserAbortError("The stream was aborted.");
        // The body ended (or broke) before `end`: resume after the last event seen.
        if (this.lastEventId === undefined || drops >= this.#maxResumes) {
          throw new APIConnectionError(
            this.lastEventId === undefined
              ? "The stream dropped before its first event; it cannot be resumed."
              : `The stream dropped ${drops + 1} times in a row; giving up (last event ${this.lastEventId}).`,
            dropped);
        }
        drops += 1;
        this.resumes += 1;
        await sleep(this.#resumeDelayMs * drops, signal);
        if (signal.aborted) throw new APIUserAbortError("The stream was aborted.");
        response = await this.#open(this.lastEventId, signal);
      }
    } catch (error) {
      failure = error;
      throw error;
    } finally {
      this.#settle(failure ?? (this.status === undefined ? new APIUserAbortError("The stream was left before its end.") : undefined));
    }
  }

  #opened(response: Response): void {
    this.response = response;
    this.runId = response.headers.get("x-run-id") ?? undefined;
    this.requestId = response.headers.get("x-request-id") ?? undefined;
  }

  /** True at the run's end (`event: end`, or OpenAI's `data: [DONE]`); throws for a lost run. */
  #ended(frame: SseFrame): boolean {
    if (frame.data === "[DONE]") {
      this.status = "completed";
      return true;
    }
    if (frame.event !== "end") return false;
    const end = json(frame) as { runId?: string; status?: RunStatus };
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

/** The stream's end: undefined, or its error (a caller that left after the final event still gets that event). */
async function settled(stream: EventStream<unknown>): Promise<unknown> {
  try {
    await stream.done();
    return undefined;
  } catch (error) {
    return error;
  }
}

/** A frame's JSON data; `{}` for a frame without data. */
function json(frame: SseFrame): unknown {
  return frame.data === "" ? {} : JSON.parse(frame.data);
}

function parse<Name extends string, Data>(frame: SseFrame, name: Name): StreamEvent<Name, Data> {
  return { event: name, id: frame.id, data: json(frame) as Data };
}

/** A frame a typed stream delivers: one of its events, with data (a frame with only an id just moves the resume point). */
function known(frame: SseFrame, events: ReadonlySet<string>): boolean {
  return frame.data !== "" && events.has(frame.event);
}

// --- chat replies (POST /v1/chat/sessions/{id}/messages?stream=true) ---------------------

/** `message.started`: the user's message as received (not yet stored: no id, ordinal 0). */
export interface ChatMessageStarted {
  event: "message.started";
  userMessage: ChatMessage;
  delta: string;
}

/** `message.delta`: the next piece of the reply's text. */
export interface ChatMessageDelta {
  event: "message.delta";
  delta: string;
}

/** `message.completed`: the stored user message and reply (with its usage and cost) and the session. */
export interface ChatMessageCompleted {
  event: "message.completed";
  userMessage: ChatMessage;
  reply: ChatMessage & { usage: NonNullable<ChatMessage["usage"]> };
  session: ChatSession;
  delta: string;
}

export type ChatStreamEvent =
  | StreamEvent<"message.started", ChatMessageStarted>
  | StreamEvent<"message.delta", ChatMessageDelta>
  | StreamEvent<"message.completed", ChatMessageCompleted>;

const CHAT_EVENTS = new Set(["message.started", "message.delta", "message.completed"]);

/** A streamed chat reply: `message.started`, `message.delta`s, `message.completed`. */
export class ChatMessageStream extends EventStream<ChatStreamEvent> {
  #completed: ChatMessageCompleted | undefined;
  #text = "";

  protected override decode(frame: SseFrame): ChatStreamEvent | undefined {
    if (!known(frame, CHAT_EVENTS)) return undefined;
    const event = parse(frame, frame.event) as ChatStreamEvent;
    if (event.event === "message.delta") this.#text += event.data.delta;
    if (event.event === "message.completed") this.#completed = event.data;
    return event;
  }

  /** The `message.completed` event's data: user message, reply and session. */
  async finalEvent(): Promise<ChatMessageCompleted> {
    const error = await settled(this);
    if (this.#completed) return this.#completed;
    throw error ?? new APIConnectionError("The stream ended without `message.completed`.");
  }

  /** The stored reply, with `usage` (`inputTokens`, `outputTokens`, `costUsdMicros`). */
  async finalMessage(): Promise<ChatMessageCompleted["reply"]> {
    return (await this.finalEvent()).reply;
  }

  /** The reply's text as streamed so far (all of it once the stream is done). */
  get text(): string {
    return this.#text;
  }
}

// --- persona generation (POST /v1/personas?stream=true) ----------------------------------

/** `run.started`, `step.started`, `step.completed`: the pipeline's progress. */
export interface PipelineProgress<Name extends string = string> {
  event: Name;
  /** The generation run (the persona's `lastRunId`). */
  runId: string;
  /** `moderate_intent`, `draft_soul`, `write_voice`, `audit`, `fingerprint` ("" for `run.started`). */
  step: string;
  /** How long the step took (`step.completed`). */
  durationMs: number;
}

/** `persona`: the finished persona. */
export interface PipelinePersona {
  event: "persona";
  runId: string;
  persona: Persona;
}

export type PersonaStreamEvent =
  | StreamEvent<"run.started", PipelineProgress<"run.started">>
  | StreamEvent<"step.started", PipelineProgress<"step.started">>
  | StreamEvent<"step.completed", PipelineProgress<"step.completed">>
  | StreamEvent<"persona", PipelinePersona>;

const PERSONA_EVENTS = new Set(["run.started", "step.started", "step.completed", "persona"]);

/** A streamed persona generation: `run.started`, `step.started`/`step.completed` per step, then `persona`. */
export class PersonaStream extends EventStream<PersonaStreamEvent> {
  #persona: Persona | undefined;

  protected override decode(frame: SseFrame): PersonaStreamEvent | undefined {
    if (!known(frame, PERSONA_EVENTS)) return undefined;
    const event = parse(frame, frame.event) as PersonaStreamEvent;
    if (event.event === "persona") this.#persona = event.data.persona;
    return event;
  }

  /** The generated persona. */
  async finalPersona(): Promise<Persona> {
    const error = await settled(this);
    if (this.#persona) return this.#persona;
    throw error ?? new APIConnectionError("The stream ended without `persona`.");
  }
}

// --- OpenAI-compatible completions (POST /v1/chat/completions, "stream": true) -----------

/** One `chat.completion.chunk` (OpenAI's streaming format). */
export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: { role?: string; content?: string | null; tool_calls?: Array<Record<string, unknown>> };
    finish_reason: string | null;
  }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

export type ChatCompletionStreamEvent = StreamEvent<"chunk", ChatCompletionChunk>;

/** A streamed completion: one `chunk` event per OpenAI chunk, until `[DONE]`. */
export class ChatCompletionStream extends EventStream<ChatCompletionStreamEvent> {
  #text = "";

  protected override decode(frame: SseFrame): ChatCompletionStreamEvent | undefined {
    if (frame.data === "") return undefined;
    const event = parse(frame, "chunk") as ChatCompletionStreamEvent;
    for (const choice of event.data.choices ?? []) this.#text += choice.delta?.content ?? "";
    return event;
  }

  /** The text of the first choice's deltas so far (all of it once the stream is done). */
  get text(): string {
    return this.#text;
  }
}
