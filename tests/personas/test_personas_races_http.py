"""Persona creates at the same moment through Envoy: a slug the service
derives (from the soul's name) is the service's to make unique, so two
creates whose souls get one name both succeed, with two slugs."""

from __future__ import annotations

import uuid

from races import at_once


def test_two_creates_deriving_one_slug_both_succeed(http, engine, tenant):
    name = "Zq" + uuid.uuid4().hex[:8]
    create = lambda: http.post("/v1/personas", json={"intent": f"A harbour pilot named {name}"},  # noqa: E731
                               headers={**tenant.auth, "Idempotency-Key": str(uuid.uuid4())})
    first, second = at_once(engine, "personas", create, create)
    assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
    slugs = {first.json()["slug"], second.json()["slug"]}
    assert len(slugs) == 2 and all(slug.startswith(name.lower()) for slug in slugs), slugs
