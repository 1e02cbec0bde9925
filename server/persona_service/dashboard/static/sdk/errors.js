// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.
export class PersonaError extends Error {
    status;
    code;
    details;
    requestId;
    headers;
    constructor(init) {
        super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
        this.name = new.target.name;
        this.status = init.status;
        this.code = init.code;
        this.details = init.details ?? {};
        this.requestId = init.requestId;
        this.headers = init.headers ?? new Headers();
    }
}
export class APIConnectionError extends PersonaError {
    constructor(message = "Connection error.", cause, code = "connection_error") {
        super({ status: 0, code, message, cause });
    }
}
export class APIConnectionTimeoutError extends APIConnectionError {
    constructor(message = "Request timed out.", cause) {
        super(message, cause, "connection_timeout");
    }
}
export class APIUserAbortError extends PersonaError {
    constructor(message = "Request was aborted.") {
        super({ status: 0, code: "aborted", message });
    }
}
export class StreamLostError extends PersonaError {
    constructor(runId, requestId, headers) {
        super({ status: 200, code: "stream_lost",
            message: `Stream ${runId} was lost: no server process could finish it; nothing of it was committed.`,
            details: { runId }, requestId, headers });
    }
}
