"""docs/real-model.md's commands work pasted at the repository root: the CLI by its path
(`.venv/bin/persona-service`, not on the PATH), and no model server on a port the service
itself takes by default (its HTTP port, its gRPC ports)."""

from __future__ import annotations

import re

from persona_service.kernel.settings import Settings
from support import ROOT

DOC = ROOT / "docs" / "real-model.md"


def shell_lines() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return [line for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S) for line in block.splitlines()]


def test_every_cli_command_names_the_cli_by_its_path():
    lines = shell_lines()
    assert any(line.startswith(".venv/bin/persona-service up") for line in lines)
    assert not [line for line in lines if re.match(r"persona-service\b", line)]
    prose = re.sub(r"^```sh\n.*?^```", "", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert not re.search(r"(?<![/\w])`persona-service up`", prose)


def test_no_model_server_listens_on_a_port_the_service_takes():
    defaults = Settings.model_fields
    taken = {defaults["http_port"].default, defaults["grpc_port"].default}
    ports = [int(p) for line in shell_lines() + [DOC.read_text(encoding="utf-8")]
             for p in re.findall(r"(?:--port[ =]|127\.0\.0\.1:|localhost:)(\d+)", line)]
    assert ports and not taken & set(ports), sorted(taken & set(ports))
