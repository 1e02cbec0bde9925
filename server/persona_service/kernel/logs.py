"""Process logging: one JSON object per line (default) or text.

A JSON line has `time` (RFC 3339, UTC), `level`, `logger`, `message`, the
request's fields when the record carries them (`request_id`, `trace_id`, `rpc`,
`status`, `code`, `org`, `workspace`, `principal`, `latency_ms`) and
`exception` with the traceback when there is one."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime

REQUEST_FIELDS = ("request_id", "trace_id", "rpc", "status", "code", "org", "workspace", "principal", "latency_ms")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in REQUEST_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str, style: str) -> None:
    """Log to stderr, as JSON lines or text (PERSONA_LOG_FORMAT)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if style == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


class Throttled:
    """A logger's lines at most once per key every `every` seconds: an
    outage (Redis down, every call failing open) must not write a line per
    request. The next line after a quiet spell says how many it suppressed."""

    def __init__(self, logger: logging.Logger, every: float = 10.0):
        self.logger = logger
        self.every = every
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when logged, suppressed since)
        self._lock = threading.Lock()

    def due(self, key: str) -> str | None:
        """None when `key` logged within `every` seconds (counted as held
        back); else the suffix its line ends with ("" or the count held back)."""
        now = time.monotonic()
        with self._lock:
            last, suppressed = self._last.get(key, (-self.every, 0))
            if now - last < self.every:
                self._last[key] = (last, suppressed + 1)
                return None
            if len(self._last) >= 1024:  # keys are few (a dependency, an organization); never grow without bound
                self._last.clear()
            self._last[key] = (now, 0)
        return f" (and {suppressed} more like it in {now - last:.0f}s)" if suppressed else ""

    def log(self, level: int, key: str, message: str, *args: object, **kwargs: object) -> bool:
        """Log unless `key` logged within `every` seconds; True when it did."""
        if not self.logger.isEnabledFor(level):
            return False
        suffix = self.due(key)
        if suffix is None:
            return False
        self.logger.log(level, message + suffix.replace("%", "%%"), *args, **kwargs)  # type: ignore[arg-type]
        return True

    def warning(self, key: str, message: str, *args: object, **kwargs: object) -> bool:
        return self.log(logging.WARNING, key, message, *args, **kwargs)
