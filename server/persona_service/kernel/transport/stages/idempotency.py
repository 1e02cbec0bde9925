"""Idempotency of a unary write sent with an `Idempotency-Key`: claim the
key, or replay the outcome stored under it. The unit of work completes the
claim (in its transaction); a failure records or releases it (outcome)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persona_service.kernel import metrics
from persona_service.kernel.errors import StoredError
from persona_service.kernel.transport.idempotency import request_hash
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from persona_service.kernel.transport.idempotency import Idempotency as Store
    from persona_service.kernel.transport.idempotency import Replay
    from persona_service.kernel.transport.policy import MethodMeta

# Headers an idempotent replay does not copy from the first response.
_PER_RESPONSE = ("x-request-id", "x-ratelimit-", "ratelimit", "x-service-plan-window-seconds", "retry-after")


class Idempotency(Stage):
    def __init__(self, store: Store, meta: MethodMeta) -> None:
        self.store = store
        self.meta = meta

    def __call__(self, call: Call) -> Any:
        key = call.metadata.get("idempotency-key")
        if key is None:
            return self.then(call)
        digest = request_hash(self.meta.path, call.ctx.caller.workspace_id,
                              call.request.SerializeToString(deterministic=True))
        call.claim, replay = self.store.begin(call.ctx.caller, key, self.meta.path, digest)
        if replay is None:
            return self.then(call)
        return self._replay(call, replay)

    def _replay(self, call: Call, replay: Replay) -> Message:
        metrics.REPLAYS.inc()
        call.ctx.headers += [*replay.headers.items(), ("idempotent-replayed", "true")]
        if replay.error_body is not None:
            raise StoredError(replay.error_status, replay.error_body, replay.headers)
        return self.meta.response_class.FromString(replay.response or b"")


def replayable(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The headers a replay answers with again."""
    return {k: v for k, v in headers if not k.startswith(_PER_RESPONSE)}
