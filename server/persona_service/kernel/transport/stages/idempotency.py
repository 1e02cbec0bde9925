"""Idempotency of a write sent with an `Idempotency-Key`: claim the key, or
replay the outcome stored under it. A unary call's unit of work completes the
claim (in its transaction); a failure records or releases it (outcome). A
stream's claim completes with its run's acceptance (kernel.transport.runs, in
the transaction that commits the run's row), and a replay follows that run
from its first frame, as a resume from `<run id>.0` does; once Redis forgot the
run (10 minutes after it ended), from the frames saved with the key when it
ended, for as long as the key is kept."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel import metrics
from persona_service.kernel.errors import NotFound, ServiceUnavailable, StoredError
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.idempotency import request_hash
from persona_service.kernel.transport.runs import ResumePoint, saved_view
from persona_service.kernel.transport.stages.call import Call, Stage
from persona_service.kernel.transport.stages.resume import Following, run_owner

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from persona_service.kernel.transport.idempotency import Claim, Replay
    from persona_service.kernel.transport.idempotency import Idempotency as Store
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.runs import Runs

# The header a stream's claim keeps: the run its replays follow.
RUN_HEADER = "x-run-id"
# Headers an idempotent replay does not copy from the first response.
_PER_RESPONSE = ("x-request-id", "x-ratelimit-", "ratelimit", "x-service-plan-window-seconds", "retry-after")


class Idempotency(Stage):
    def __init__(self, store: Store, meta: MethodMeta) -> None:
        self.store = store
        self.meta = meta

    def __call__(self, call: Call) -> object:
        begun = self._begin(call)
        if begun is None:
            return self.then(call)
        call.claim, replay = begun
        return self.then(call) if replay is None else self._replay(call, replay)

    def _begin(self, call: Call) -> tuple[Claim, Replay | None] | None:
        """The key's claim and the outcome stored under it to replay (None: this call claimed it); None for a
        call sent without a key."""
        key = call.metadata.get("idempotency-key")
        if key is None:
            return None
        digest = request_hash(self.meta.path, call.ctx.caller.workspace_id,
                              call.message.SerializeToString(deterministic=True))
        return self.store.begin(call.ctx.caller, key, self.meta.path, digest)

    def _replay(self, call: Call, replay: Replay) -> Message:
        metrics.REPLAYS.inc()
        call.ctx.headers += [*replay.headers.items(), ("idempotent-replayed", "true")]
        if replay.error_body is not None:
            raise StoredError(replay.error_status, replay.error_body, replay.headers)
        return self.meta.response_class.FromString(replay.response or b"")


class StreamIdempotency(Idempotency):
    """A streamed write's key: the first request claims it and starts the run (its claim completes with the run's
    acceptance, pipeline); the same request again follows that run from its first frame (`Idempotent-Replayed`),
    so a client that never heard the first answer (a node lost before it, Envoy's 503) asks again without a
    second run. Redis keeps a run's frames `FINISHED_TTL` after it ends; the run's end saved them with the key
    (kernel.transport.runs `Runs.keep`), so a replay after that is answered from there, the same frames (404
    only when that save failed, as a resume's)."""

    def __init__(self, store: Store, runs: Runs, meta: MethodMeta) -> None:
        super().__init__(store, meta)
        self.runs = runs

    def __call__(self, call: Call) -> object:
        begun = self._begin(call)
        if begun is None:
            return self.then(call)
        claim, replay = begun
        if replay is None:
            call.claim = claim
            return self.then(call)
        # A replay holds no claim: its failure (the run's frames expired) must not release the key.
        return self._follow(call, claim, replay)

    def _follow(self, call: Call, claim: Claim, replay: Replay) -> Following:
        if replay.error_body is not None:
            raise StoredError(replay.error_status, replay.error_body, replay.headers)
        run_id = replay.headers[RUN_HEADER]  # a stream's claim completes only with its run's acceptance
        metrics.REPLAYS.inc()
        call.ctx.headers.append(("idempotent-replayed", "true"))
        assert call.context is not None  # a caller's call
        unit_of_work(call.ctx).close()  # following needs no database
        try:
            frames, outcome = self.runs.resume(ResumePoint(run_id, 0), run_owner(call), self.meta.path,
                                               call.context.is_active)
        except (NotFound, ServiceUnavailable):  # Redis forgot the run (or is away): its saved frames, if it ended
            saved = self.store.kept_frames(claim, run_id)
            if saved is None:
                raise
            frames, outcome = saved_view(saved)
        return Following(None, frames, outcome, run_id)


def replayable(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The headers a replay answers with again."""
    return {k: v for k, v in headers if not k.startswith(_PER_RESPONSE)}
