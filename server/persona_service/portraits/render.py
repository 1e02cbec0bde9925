"""The render task (kernel.transport.tasks kind `portraits.render`): draw or edit one
portrait's PNG with the image provider and store it. No transaction is open
while the provider works; a provider failure (after its retries) settles the
portrait `failed` with the error's code."""

from __future__ import annotations

import io
import logging

from persona_service.files.api import HasResources, ObjectNotFound, storage_for
from persona_service.kernel.api import NO_CALL, AuditEntry, ImageProvider, ProviderError, Resource, Runtime, TaskRecord
from persona_service.portraits.records import PortraitRecord
from persona_service.portraits.service import PortraitService
from persona_service.providers.factory import backoff_delays, make_image_provider
from persona_service.providers.retrying import Retrying, failure_details

log = logging.getLogger("persona_service.portraits")
# The process's image provider and the spec's backoff (made once per App).
IMAGES: Resource[tuple[ImageProvider, tuple[float, ...]]] = Resource(
    "portraits.images", lambda settings: (make_image_provider(), backoff_delays()))


def provider_name(owner: HasResources) -> str:
    return owner.resources.get(IMAGES)[0].name


def image_provider(runtime: Runtime, portrait: PortraitRecord) -> Retrying:
    """The image provider for one portrait, retried; every failed upstream
    attempt is written to the audit log under the portrait's organization
    and workspace (its envelope under `details.upstream`, never shown to
    callers), as a text provider's is, so the organization sees it in
    GET /v1/audit/events."""
    provider, delays = runtime.resources.get(IMAGES)

    def audit(error: ProviderError, attempt: int, operation: str) -> None:
        runtime.audit([AuditEntry(
            action="provider.call", outcome="failure", status=error.spec.http_status, request_id="", client_ip=None,
            org_id=portrait.org_id, workspace_id=portrait.workspace_id, resource_type="provider",
            resource_id=error.provider, error_code=error.code,
            details={**failure_details(error, attempt, operation), "portraitId": portrait.id},
        )])

    return Retrying(provider, NO_CALL, delays=delays, on_failure=audit)  # a task: nobody's request


def render(runtime: Runtime, task: TaskRecord) -> None:
    with runtime.work() as work:
        job = PortraitService(work).start_render(task.subject_id)
    if job is None:
        return  # settled already (a retried task whose earlier attempt finished)
    portrait = job.portrait
    storage, images = storage_for(runtime), image_provider(runtime, portrait)
    try:
        if job.prompt is not None:
            png = images.generate_image(job.prompt)
        else:
            if job.source_key is None:
                raise ObjectNotFound(portrait.id)
            png = images.edit_image(storage.get(job.source_key).data, portrait.instruction)
    except ProviderError as err:
        log.warning("portrait %s failed: %s (%s)", portrait.id, err.code, err.reason)
        _fail(runtime, portrait.id, err.code)
        return
    except ObjectNotFound:  # the persona or the source image is gone
        _fail(runtime, portrait.id, "source_missing")
        return
    from PIL import Image  # (Pillow loads in the process that renders, not in every process of the registry)

    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    storage.put(portrait.storage_key, png, "image/png")
    with runtime.work() as work:
        PortraitService(work).finish_render(portrait.id, len(png), width, height)


def give_up(runtime: Runtime, task: TaskRecord, error: str) -> None:
    _fail(runtime, task.subject_id, "internal_error")


def _fail(runtime: Runtime, portrait_id: str, code: str) -> None:
    with runtime.work() as work:
        PortraitService(work).fail_render(portrait_id, code)
