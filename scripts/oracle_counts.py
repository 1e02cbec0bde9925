"""What the suite's race checks run, counted from the code, for docs/concurrency.md's generated lines.

- the serial oracle's pairs: the pair tests pytest collects from the table modules
  (`tests/**/test_*serial_oracle*_http.py`, a pair's id is `A+B`), each run `PAIR_ROUNDS` times where its module
  sets it (the cross-aggregate tables) and once otherwise (`ORACLE_ROUNDS` unset);
- the race hunt's operations (scripts/race_hunt.py, from the protos): those hunted, the update/delete pairs, the
  streams called once, the writes not called.

    .venv/bin/python scripts/oracle_counts.py            # print the lines
    .venv/bin/python scripts/oracle_counts.py --write    # put them in docs/concurrency.md
    .venv/bin/python scripts/oracle_counts.py --check    # exit 1 if the doc's lines differ (tests/scripts)

Each generated line sits between `<!-- generated:NAME (scripts/oracle_counts.py) -->` and `<!-- /generated -->`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import os
import pathlib
import re
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "concurrency.md"
TABLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("**/test_*serial_oracle*_http.py"))


class _Collector:
    """A pytest plugin that keeps the collected items' (file, id, the module's PAIR_ROUNDS or 1)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, int]] = []

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for item in items:
            rounds = getattr(item.module, "PAIR_ROUNDS", 1)
            self.items.append((item.nodeid.split("::")[0], item.nodeid.split("[", 1)[-1], rounds))


def oracle_pairs() -> dict[str, tuple[int, int]]:
    """(pairs, concurrent runs) by table file, as `make test` runs them (one round unless the module says more)."""
    import pytest

    os.environ.pop("ORACLE_ROUNDS", None)  # the suite's short form
    collector = _Collector()
    with contextlib.redirect_stdout(io.StringIO()) as said:  # (the collected ids: not ours to print)
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *TABLES], plugins=[collector])
    assert code == 0, f"collecting the oracle tables failed ({code}):\n{said.getvalue()[-3000:]}"
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for path, test_id, rounds in collector.items:
        if "+" in test_id:  # a pair (the other tests check the tables cover every write)
            counts[path][0] += 1
            counts[path][1] += rounds
    return {path: (pairs, runs) for path, (pairs, runs) in counts.items()}


def race_hunt() -> dict[str, int]:
    spec = importlib.util.spec_from_file_location("race_hunt", ROOT / "scripts" / "race_hunt.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["race_hunt"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ops = module.operations()
    return {
        "ops": len(ops),
        "against_delete": len(module.against_delete(ops)),
        "others": len(module.others()),
        "not_called": len(module.NOT_CALLED),
    }


def lines() -> dict[str, str]:
    """The generated lines, by name."""
    tables = oracle_pairs()
    pairs, runs = sum(p for p, _ in tables.values()), sum(r for _, r in tables.values())
    repeated = {path: (p, r) for path, (p, r) in tables.items() if r > p}
    rounds = " or ".join(str(n) for n in sorted({r // p for p, r in repeated.values()}))
    hunt = race_hunt()
    return {
        "oracle-pairs": (
            f"`make test` runs {pairs} pairs from {len(tables)} table files, {runs} concurrent runs: each pair once, "
            f"but the {sum(p for p, _ in repeated.values())} pairs of the {len(repeated)} cross-aggregate tables, "
            f"which run {rounds} rounds ({sum(r for _, r in repeated.values())} runs)."
        ),
        "race-hunt": (
            f"{hunt['ops']} operations are hunted (every write RPC that reads an `Idempotency-Key`) with "
            f"{hunt['against_delete']} update/delete pairs; {hunt['others']} streams are called once each and "
            f"{hunt['not_called']} write RPC(s) called neither way (`NOT_CALLED`, each with why)."
        ),
    }


# A generated block: its opening line, its text (one paragraph, no `<`), its closing line.
_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[\w-]+) \(scripts/oracle_counts.py\) -->\n)(?P<body>[^<]*)(<!-- /generated -->)"
)


def render(doc: str, generated: dict[str, str]) -> str:
    found = {m.group("name") for m in _BLOCK.finditer(doc)}
    assert found == set(generated), f"docs/concurrency.md's generated blocks are {sorted(found)}"
    return _BLOCK.sub(lambda m: m.group(1) + generated[m.group("name")] + "\n" + m.group(4), doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    generated = lines()
    doc = DOC.read_text()
    if args.check:
        if render(doc, generated) != doc:
            print("docs/concurrency.md's counts are stale: run scripts/oracle_counts.py --write", file=sys.stderr)
            return 1
        return 0
    if args.write:
        DOC.write_text(render(doc, generated))
    for name, line in generated.items():
        print(f"{name}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
