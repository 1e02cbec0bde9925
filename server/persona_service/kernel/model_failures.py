"""One classification of every failed upstream model call.

Each failure (`base.ProviderError`) is one of the reasons below. The reason decides three things:

* whether it is worth trying again (`retryable`): a wrong key, a model the server does not have or a request it
  rejects is answered the same way every time, so neither the service (`retrying.Retrying`) nor its client
  (`x-should-retry: false`, `details.retryable: false`) tries again;
* what the caller's error `details` say: `reason` (the code below), `upstreamStatus` (when an answer came),
  `upstreamMessage` (what the model server said, short, with keys and URLs blanked out and never the prompt),
  `retryable`, and `retryAfter` (seconds) where the upstream asked to wait;
* what the server's log line for the request says (`cause`).

A 429 or 503 is retried after the upstream's `Retry-After` (never sooner than the backoff), within the retry
budget; when the budget is spent the caller gets `503 service_unavailable` with that `Retry-After`
(docs/real-model.md, "When the model fails").
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MESSAGE_LIMIT = 200  # characters of the upstream's own words a caller may see
MAX_RETRY_AFTER = 3600.0  # seconds: a longer wait asked for is capped (and then not waited for)


@dataclass(frozen=True)
class Reason:
    code: str
    retryable: bool
    says: str  # the cause in words, for the log line and docs


def _reasons(*items: Reason) -> dict[str, Reason]:
    return {item.code: item for item in items}


REASONS: dict[str, Reason] = _reasons(
    # Configuration: the same answer every time, never retried.
    Reason("upstream_auth", False, "the model server refused the credentials (HTTP 401/403): check the API key"),
    Reason("model_not_found", False, "the model server does not have the configured model"),
    Reason("endpoint_not_found", False, "the model server has no such endpoint (HTTP 404): keep that part `local`"),
    Reason("upstream_rejected", False, "the model server rejected the request (HTTP 4xx)"),
    # Load: retried after the upstream's Retry-After, within the budget.
    Reason("upstream_rate_limited", True, "the model server is rate limiting (HTTP 429)"),
    Reason("upstream_unavailable", True, "the model server is unavailable (HTTP 503)"),
    # Transient: retried with backoff.
    Reason("upstream_error", True, "the model server failed (HTTP 5xx)"),
    Reason("timeout", True, "the model server did not answer in time"),
    Reason("connection_refused", True, "the model server refused the connection (is it running?)"),
    Reason("connection_failed", True, "the model server could not be reached"),
    Reason("connection_closed", True, "the model server closed the connection before its answer was complete"),
    Reason("stream_cut", True, "the model's stream ended before its end marker ([DONE])"),
    Reason("malformed_response", True, "the model server's answer is not in the OpenAI wire format"),
    Reason("upstream_error_event", True, "the model server sent an error instead of (or within) its answer"),
    Reason("reply_not_json", True, "the model's reply was not the JSON object asked for"),
    Reason("runners_unreachable", True, "the model's runners could not be reached"),
    Reason("no_runner", True, "no runner answered the model call in time"),
    Reason("provider_failed", True, "the upstream provider failed"),
)

_MODEL_MISSING = re.compile(r"model.{0,120}(not found|does not exist|not exist|unknown|no such|not available|"
                            r"not loaded|pull)|(unknown|invalid|no such) model", re.IGNORECASE | re.DOTALL)
_SECRETS = (
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*.]{4,}"), "[key]"),
    (re.compile(r"\bBearer\s+\S+", re.IGNORECASE), "Bearer [key]"),
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://\S+"), "[url]"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "[address]"),
    (re.compile(r"\b[A-Za-z0-9_\-]{32,}\b"), "[redacted]"),  # anything long and opaque may be a key
)
_TAGS = re.compile(r"<[^>]{1,200}>")  # an HTML error page: its text, not its markup
_PROMPT_WINDOW = 24  # characters: an upstream message quoting this much of the prompt is withheld


def reason(code: str) -> Reason:
    return REASONS.get(code) or REASONS["provider_failed"]


def from_status(status: int | None, message: str = "", envelope: object = None) -> str:
    """The reason of an HTTP error answer (None: no answer, the transport failed)."""
    if status is None:
        return "provider_failed"
    code = _envelope_code(envelope)
    if status in (401, 403):
        return "upstream_auth"
    if status == 429:
        return "upstream_rate_limited"
    if status == 503:
        return "upstream_unavailable"
    if status in (408, 504):
        return "timeout"
    if 400 <= status < 500:
        if code in ("model_not_found", "invalid_model") or _MODEL_MISSING.search(message or ""):
            return "model_not_found"
        if status == 404:
            return "endpoint_not_found"
        if status == 409:  # a conflict the upstream may resolve: OpenAI asks to retry these
            return "upstream_error"
        return "upstream_rejected"
    if status >= 500:
        return "upstream_error"
    return "malformed_response"  # a 2xx or 3xx that could not be used


def upstream_message(envelope: object, body: str = "") -> str:
    """What the upstream said of its failure: its envelope's message (OpenAI's `error.message`, vLLM's `message`,
    a plain `error` string, FastAPI's `detail`), else the first line of its body; raw, not yet redacted."""
    candidates: list[object] = []
    if isinstance(envelope, dict):
        error = envelope.get("error")
        if isinstance(error, dict):
            candidates.append(error.get("message"))
        candidates += [error, envelope.get("message"), envelope.get("detail")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    text = _TAGS.sub(" ", body or "").strip() if _TAGS.search(body or "") else (body or "").strip()
    return text.splitlines()[0].strip() if text else ""


def shown(message: str, secrets: Iterable[str] = (), prompt: str = "") -> str:
    """An upstream message as a caller may see it: one line, keys, URLs and addresses blanked out, withheld when
    it quotes the prompt, cut to MESSAGE_LIMIT characters."""
    text = " ".join((message or "").split())
    if not text:
        return ""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[key]")
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    if prompt and _quotes(text, " ".join(prompt.split())):
        return "(withheld: the model server's message quotes the request)"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _quotes(text: str, prompt: str) -> bool:
    if len(prompt) < _PROMPT_WINDOW:
        return bool(prompt) and len(prompt) >= 8 and prompt in text
    return any(text[i:i + _PROMPT_WINDOW] in prompt for i in range(0, max(0, len(text) - _PROMPT_WINDOW) + 1))


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds an upstream asked to wait: `Retry-After` (seconds or an HTTP-date) or `retry-after-ms`."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return min(MAX_RETRY_AFTER, max(0.0, float(millis) / 1000))
        except ValueError:
            pass
    value = (lowered.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


def header_seconds(seconds: float) -> str:
    """A Retry-After header's value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


def _envelope_code(envelope: object) -> str:
    if isinstance(envelope, dict):
        error = envelope.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return str(error["code"])
    return ""
