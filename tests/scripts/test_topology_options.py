"""`make topology` / `make bench-topology` pass TOPOLOGY_ARGS / BENCH_ARGS to scripts/topology.py: the options
`up` and `bench` share that choose the data tier (the `--…-ha` ones) are named where the targets are
described, the Makefile's comment above them and docs/scaling-out.md's paragraph on `make topology`."""

from __future__ import annotations

import re

from support import ROOT


def _shared_ha_options() -> list[str]:
    source = (ROOT / "scripts" / "topology.py").read_text()
    found = re.findall(r'\bp\.add_argument\("(--[a-z]+-ha)"', source)  # `p`: each of up's and bench's parsers
    assert found, "scripts/topology.py: no shared --…-ha option found (parsing changed?)"
    return found


def test_the_makefile_and_docs_name_every_ha_option():
    makefile = (ROOT / "Makefile").read_text()
    comment = makefile[:makefile.index("\ntopology:")].rsplit("\n\n", 1)[1]
    doc = (ROOT / "docs" / "scaling-out.md").read_text()
    paragraph = doc[doc.index("`make topology` brings it up"):][:600]
    for option in _shared_ha_options():
        assert option in comment, f"Makefile's topology comment: {option}"
        assert option in paragraph, f"docs/scaling-out.md, `make topology`: {option}"
