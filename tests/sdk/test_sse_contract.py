"""One stream contract across the SDKs: every case of sse_cases.json goes through the Python
SDK's parser (SSEDecoder) and the TypeScript SDK's (readFrames, run by node), each chunked as
given, whole and one byte at a time, and must deliver exactly the frames the case expects."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from persona_sdk import SSEDecoder

HERE = Path(__file__).resolve().parent
CASES: list[dict[str, Any]] = json.loads((HERE / "sse_cases.json").read_text(encoding="utf-8"))["cases"]
NODE = shutil.which("node") or "node"


def chunkings(case: dict[str, Any]) -> dict[str, list[bytes]]:
    given = [bytes.fromhex(c["hex"]) if isinstance(c, dict) else c.encode() for c in case["chunks"]]
    whole = b"".join(given)
    return {"given": given, "whole": [whole] if whole else [], "bytes": [whole[i:i + 1] for i in range(len(whole))]}


def expected(case: dict[str, Any]) -> dict[str, Any]:
    return {"frames": case["frames"], "resume": case["resume"], "broke": case["end"] == "broken"}


def body(chunks: list[bytes], end: str) -> Iterator[bytes]:
    yield from chunks
    if end == "broken":
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_python_parser(case: dict[str, Any]) -> None:
    for how, chunks in chunkings(case).items():
        decoder = SSEDecoder()
        frames: list[dict[str, str]] = []
        broke = False
        try:
            for frame in decoder.frames(body(chunks, case["end"])):
                frames.append({"id": frame.id, "event": frame.event, "data": frame.data})
        except httpx.TransportError:
            broke = True
        got = {"frames": frames, "resume": frames[-1]["id"] if frames else "", "broke": broke}
        assert got == expected(case), f"{case['name']} ({how}): {case['about']}"
        assert decoder.retry_ms == case["retry"], f"{case['name']} ({how}): retry"


def test_typescript_parser() -> None:
    """All cases in one node process (tests/sdk/sse_cases.mjs transpiles sdk/typescript/src/sse.ts)."""
    result = subprocess.run([NODE, str(HERE / "sse_cases.mjs"), str(HERE / "sse_cases.json")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    wrong = [f"{case['name']} ({how}): {case['about']}\n  got  {json.dumps(seen)}\n  want {json.dumps(expected(case))}"
             for case in CASES for how, seen in got[case["name"]].items() if seen != expected(case)]
    assert not wrong, "\n".join(wrong)
