"""Process logging: one JSON object per line (default) or text.

A JSON line has `time` (RFC 3339, UTC), `level`, `logger`, `message`, the
request's fields when the record carries them (`request_id`, `trace_id`, `rpc`,
`status`, `code`, `org`, `workspace`, `principal`, `latency_ms`) and
`exception` with the traceback when there is one."""

from __future__ import annotations

import json
import logging
import sys
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
