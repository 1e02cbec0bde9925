"""A persona's writes that call a model (refine, regenerate, fork; audit alike) hold no lock on the persona while the
model works; they decide again under the lock before they store (personas/service.py `_locked_if_current`,
docs/concurrency.md). Through Envoy, each made to meet another write where that matters: the test holds the
writes of `generation_runs` (the run's insert, after the persona was read and the model's work done, before the
persona is locked: a run is written as it ends, issue 50), lets the other write commit, then lets the run go."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from races import wait_for_waiters
from sqlalchemy import text
from support import assert_envelope, writes_locked


def _persona_at_version_2(http, tenant) -> str:
    made = http.post("/v1/personas", json={"intent": "A patient ferry captain who collects sea shanties"},
                     headers=tenant.auth)
    assert made.status_code == 200, made.text
    pid = made.json()["id"]
    again = http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "fingerprint"}, headers=tenant.auth)
    assert again.status_code == 200 and again.json()["version"] == 2, again.text
    return pid


def _while_a_run_waits(engine, start, meanwhile):
    """`start()` (a write whose run's insert waits), then `meanwhile()` once it waits; both answers."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        with writes_locked(engine, "generation_runs"):
            started = pool.submit(start)
            wait_for_waiters(engine, 1)
            other = meanwhile()
        return started.result(timeout=60), other


def _runs(engine, pid: str, kind: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM generation_runs WHERE persona_id = :p AND kind = :k"),
                            {"p": pid, "k": kind}).scalar_one()


def test_a_patch_is_not_held_up_by_a_refine_at_work(http, engine, tenant):
    pid = _persona_at_version_2(http, tenant)
    refined, patched = _while_a_run_waits(
        engine, lambda: http.post(f"/v1/personas/{pid}/refine", json={"instruction": "Braver"}, headers=tenant.auth),
        lambda: http.patch(f"/v1/personas/{pid}", json={"displayName": "Renamed"}, headers=tenant.auth, timeout=10))
    assert patched.status_code == 200, patched.text  # (it used to wait for the refine's model call and commit)
    assert refined.status_code == 200, refined.text
    assert (refined.json()["version"], refined.json()["displayName"]) == (3, "Renamed")


def test_a_refine_whose_version_was_replaced_meanwhile_refines_the_new_one(http, engine, tenant):
    pid = _persona_at_version_2(http, tenant)
    refined, rolled = _while_a_run_waits(
        engine, lambda: http.post(f"/v1/personas/{pid}/refine", json={"instruction": "Braver"}, headers=tenant.auth),
        lambda: http.post(f"/v1/personas/{pid}/rollback", json={"version": 1}, headers=tenant.auth, timeout=10))
    assert rolled.status_code == 200 and rolled.json()["version"] == 3, rolled.text
    assert refined.status_code == 200 and refined.json()["version"] == 4, refined.text  # as rollback, then refine
    # The first attempt (its soul made from version 2) went with its savepoint: one refine run is recorded, as
    # serially, where the refine runs once, on version 3.
    assert _runs(engine, pid, "refine") == 1
    versions = http.get(f"/v1/personas/{pid}/versions", headers=tenant.auth).json()["items"]
    assert [(v["version"], v["kind"]) for v in versions] == [(4, "refine"), (3, "rollback"), (2, "regenerate"),
                                                              (1, "create")]


def test_a_regenerate_of_a_persona_deleted_meanwhile_is_a_409(http, engine, tenant):
    pid = _persona_at_version_2(http, tenant)
    regenerated, deleted = _while_a_run_waits(
        engine, lambda: http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "fingerprint"},
                                  headers=tenant.auth),
        lambda: http.delete(f"/v1/personas/{pid}", headers=tenant.auth, timeout=10))
    assert deleted.status_code == 200, deleted.text
    assert_envelope(regenerated, 409, "state_conflict")  # as the deletion, then the regenerate
    assert http.get(f"/v1/personas/{pid}", headers=tenant.auth).json()["version"] == 2


def test_a_fork_of_a_persona_deleted_meanwhile_is_a_409(http, engine, tenant):
    pid = _persona_at_version_2(http, tenant)
    forked, deleted = _while_a_run_waits(
        engine, lambda: http.post(f"/v1/personas/{pid}/fork", json={}, headers=tenant.auth),
        lambda: http.delete(f"/v1/personas/{pid}", headers=tenant.auth, timeout=10))
    assert deleted.status_code == 200, deleted.text
    assert_envelope(forked, 409, "state_conflict")  # as the deletion, then the fork
    lineage = http.get(f"/v1/personas/{pid}/lineage", headers=tenant.auth).json()
    assert lineage["root"]["children"] == []
