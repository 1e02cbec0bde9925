"""The Python SDK's persona versions, search and sort, and cost preview
(#41) against the real stack through Envoy: typed answers, typed errors,
pagination that follows the requested order."""

from __future__ import annotations

import pytest
from persona_sdk import NotFoundError, PersonaClient, StateConflictError, ValidationFailedError
from persona_sdk.types import GenerationPreview, PersonaVersion


@pytest.fixture(scope="module")
def client(stack, tenants):
    with PersonaClient(api_key=tenants(plan="pro").api_key, base_url=stack.http_url, max_retries=0) as client:
        yield client


def test_versions_diff_rollback_and_a_pinned_session(client):
    persona = client.personas.create(intent="A thoughtful clockmaker who repairs old watches")
    refined = client.personas.refine(persona.id, instruction="more whimsical", note="whimsy")
    assert refined.version == 2
    versions = list(client.personas.list_versions_iter(persona.id, limit=1))
    assert [v.version for v in versions] == [2, 1] and all(isinstance(v, PersonaVersion) for v in versions)
    first = client.personas.get_version(persona.id, 1)
    assert first.kind == "create" and first.soul == persona.soul and first.voice.version == 1
    diff = client.personas.diff_versions(persona.id, from_version=1, to_version=2)
    assert diff.changes and {c.field.split(".")[0] for c in diff.changes} <= {"soul", "voice"}
    assert client.personas.diff_versions(persona.id, from_version=2, to_version=2).changes == []
    rolled = client.personas.rollback(persona.id, version=1)
    assert rolled.version == 3 and rolled.soul == persona.soul
    assert client.personas.get_version(persona.id, 3).source_version == 1
    with pytest.raises(StateConflictError):
        client.personas.rollback(persona.id, version=3)
    with pytest.raises(NotFoundError):
        client.personas.get_version(persona.id, 40)
    session = client.chat.create_session(persona_id=persona.id, persona_version=2)
    assert session.persona_version == 2
    assert client.openai.get_model(f"persona://{persona.id}@2").id == f"persona://{persona.id}@2"


def test_search_sort_and_preview(client):
    names = ["Odalys Fenwick", "Barnaby Fenwick", "Cosima Fenwick"]
    for name in names:
        client.personas.create(intent=f"{name}, a keeper of lighthouse logs", display_name=name)
    found = [p.display_name for p in client.personas.list_iter(q="fenwick", order_by="display_name", limit=1)]
    assert found == sorted(names)
    assert [p.display_name for p in client.personas.list(q="FENWICK", order_by="display_name desc").items] == \
        sorted(names, reverse=True)
    with pytest.raises(ValidationFailedError):
        client.personas.list(order_by="slug")  # type: ignore[arg-type]
    preview = client.personas.preview(intent="A weary night-shift nurse who hums old songs")
    assert isinstance(preview, GenerationPreview) and preview.estimated_input_tokens > 0
    quota = preview.quota
    assert quota.would_use == 1 and quota.used >= len(names) and quota.remaining == quota.limit - quota.used
    assert [s.step for s in preview.steps][0] == "moderate_intent"
