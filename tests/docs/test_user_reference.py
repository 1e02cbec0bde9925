"""The API reference says what users need, never how it is built: proto
comments' maintainers' notes (`(-- ... --)`, AIP-192) reach neither
gen/openapi.json (and so neither the SDKs' docstrings) nor `/docs`."""

from __future__ import annotations

import copy
import html
import json
import pathlib
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # as when the generators run: scripts/ is sys.path[0]
from proto_comments import CommentError, user_text  # noqa: E402

OPENAPI = ROOT / "gen" / "openapi.json"

# Words of the implementation: SQL, locking, storage layout, the code's own names.
IMPLEMENTATION = re.compile(
    r"SKIP LOCKED|\bSELECT\b|\bUPDATE\b[^.]*\bSET\b|\bRedis\b|\bthreads?\b|\bmutex|\bleases?\b|\brepository\b"
    r"|tables\.py|\w\.py\b|\bservicers?\b|\bkernel\b|\boutbox\b|\btranscoder\b|wire_name|\bthe spec\b"
    r"|\bspec \d|\bspec:|\btransactions?\b|\bSQL\b|\(--|--\)", re.IGNORECASE)
# The probes name the stack's parts: their check names (`postgres`, `redis`) are what they answer.
NAMES_THE_STACK = ("/paths//readyz/", "/components/schemas/ProbeCheck/")


def descriptions(document: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(where, text) of every description and summary of an OpenAPI document."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in ("description", "summary") and isinstance(value, str):
                yield f"{path}/{key}", value
            else:
                yield from descriptions(value, f"{path}/{key}")
    elif isinstance(document, list):
        for i, value in enumerate(document):
            yield from descriptions(value, f"{path}/{i}")


def leaks(document: dict[str, Any]) -> list[str]:
    return [f"{where}: {found.group(0)!r} in {text[:120]!r}" for where, text in descriptions(document)
            if not where.startswith(NAMES_THE_STACK) for found in [IMPLEMENTATION.search(text)] if found]


def test_notes_are_dropped_and_paragraphs_kept():
    comment = """ Builds the oldest pending export. (-- Claimed with `FOR UPDATE
 SKIP LOCKED` under a lease. --) Concurrent calls never build the same one
 (-- one transaction each --).
 (-- A note on lines
 of its own. --)
 Call it repeatedly.

 Auth: admins.
"""
    assert user_text(comment) == ("Builds the oldest pending export. Concurrent calls never build the same one. "
                                  "Call it repeatedly.  Auth: admins.")
    assert user_text(" (-- Only a note. --)\n") == ""


@pytest.mark.parametrize("comment", [" An open (-- note.\n", " A stray --) close.\n", " (-- a --) b --)\n"])
def test_an_unbalanced_marker_fails_generation(comment):
    with pytest.raises(CommentError):
        user_text(comment)


def test_the_openapi_document_carries_no_maintainers_note():
    document = json.loads(OPENAPI.read_text())
    assert leaks(document) == []
    # The notes are in the protos, and the user text around them made it through.
    assert "SKIP LOCKED" in (ROOT / "proto" / "persona" / "v1" / "admin.proto").read_text()
    build_one = document["paths"]["/v1/admin/dsar/build-one"]["post"]["description"]
    assert build_one.startswith("Builds the oldest pending privacy export") and "never build the same" in build_one
    # A service's comment is its tag's description.
    tags = {tag["name"]: tag.get("description", "") for tag in document["tags"]}
    assert "at least once" in tags["Webhook"] and "worker" not in tags["Webhook"]


def test_a_planted_note_is_caught():
    document = json.loads(OPENAPI.read_text())
    for planted in ("Claims it with `FOR UPDATE SKIP LOCKED`.", "Kept in a Redis hash.", "See kernel/data/uow.py.",
                    "Runs on a thread pool.", "UPDATE personas SET state = 'x'.", "A (-- leaked --) marker."):
        copied = copy.deepcopy(document)
        copied["components"]["schemas"]["Persona"]["properties"]["slug"]["description"] += " " + planted
        assert leaks(copied), planted
        copied = copy.deepcopy(document)
        copied["tags"][0]["description"] = planted
        assert leaks(copied), planted


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_docs_page_carries_no_maintainers_note(http):
    page = http.get("/docs").text
    document = http.get("/v1/openapi.json").json()
    text = _text(page.split("<h2>Schemas</h2>")[0])  # the schemas' JSON follows: checked as the document
    stack = [d for where, d in descriptions(document) if where.startswith(NAMES_THE_STACK)]
    for paragraph in (p for described in stack for p in described.split("  ")):
        text = text.replace(paragraph, "")
    found = IMPLEMENTATION.search(text)
    assert found is None, text[max(0, found.start() - 120):found.end() + 120]
    assert leaks(document) == []
    # Users read the resource's rules (the service comment) and each operation's.
    assert "Delivery (at least once)" in text and "Builds the oldest pending privacy export" in text
