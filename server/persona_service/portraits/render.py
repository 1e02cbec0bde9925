"""The render task (kernel.tasks kind `portraits.render`): draw or edit one
portrait's PNG with the image provider and store it. No transaction is open
while the provider works; a provider failure (after its retries) settles the
portrait `failed` with the error's code."""

from __future__ import annotations

import io
import logging

from PIL import Image

from persona_service.files.storage import ObjectNotFound, storage_for
from persona_service.kernel.audit import AuditEntry, AuditLog
from persona_service.kernel.tasks import TaskRecord
from persona_service.portraits.service import PortraitService
from persona_service.providers.base import ProviderError
from persona_service.providers.factory import backoff_delays, make_image_provider
from persona_service.providers.retrying import Retrying

log = logging.getLogger("persona_service.portraits")
_PROVIDERS: dict[int, Retrying] = {}


def image_provider(app) -> Retrying:
    """The process's image provider, retried with the spec's backoff; every
    failed upstream attempt is written to the audit log (its envelope under
    `details`, never shown to callers)."""
    provider = _PROVIDERS.get(id(app))
    if provider is None:
        def audit(error: ProviderError, attempt: int, operation: str) -> None:
            with app.engine.begin() as conn:
                AuditLog(conn).record(AuditEntry(
                    action="provider.call", outcome="failure", status=error.spec.http_status, request_id="",
                    client_ip=None, resource_type="provider", resource_id=error.provider, error_code=error.code,
                    details={"operation": operation, "attempt": attempt, "upstreamStatus": error.upstream_status,
                             "upstream": error.upstream, "reason": error.reason},
                ))

        provider = _PROVIDERS[id(app)] = Retrying(make_image_provider(), delays=backoff_delays(), on_failure=audit)
    return provider


def render(app, task: TaskRecord) -> None:
    with app.stream_engine.begin() as conn:
        job = PortraitService(conn).start_render(task.subject_id)
    if job is None:
        return  # settled already (a retried task whose earlier attempt finished)
    storage, images = storage_for(app), image_provider(app)
    portrait = job.portrait
    try:
        if job.prompt is not None:
            png = images.generate_image(job.prompt)
        else:
            if job.source_key is None:
                raise ObjectNotFound(portrait.id)
            png = images.edit_image(storage.get(job.source_key).data, portrait.instruction)
    except ProviderError as err:
        log.warning("portrait %s failed: %s (%s)", portrait.id, err.code, err.reason)
        _fail(app, portrait.id, err.code)
        return
    except ObjectNotFound:  # the persona or the source image is gone
        _fail(app, portrait.id, "source_missing")
        return
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    storage.put(portrait.storage_key, png, "image/png")
    with app.stream_engine.begin() as conn:
        PortraitService(conn).finish_render(portrait.id, len(png), width, height)


def give_up(app, task: TaskRecord, error: str) -> None:
    _fail(app, task.subject_id, "internal_error")


def _fail(app, portrait_id: str, code: str) -> None:
    with app.stream_engine.begin() as conn:
        PortraitService(conn).fail_render(portrait_id, code)
