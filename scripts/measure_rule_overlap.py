"""Which of the layout's AST rules still catch something no other static check does (issue 47: rules that
capabilities made unnecessary are removed, not kept out of habit).

    python scripts/measure_rule_overlap.py            (a line per rule)
    python scripts/measure_rule_overlap.py --cases    (also each planted case, with the other rules catching it)
    python scripts/measure_rule_overlap.py --rule R   (only the cases of rule R; repeatable)

Each planted case of tests/test_architecture.py whose check is an AST rule is planted again in a copy of the
package (hard links, the planted file written anew), and every other AST rule is run on it. A rule whose every
planted case another rule also names (the planted file or its module) is redundant on what is planted; one
with a case only it catches is not. This reads the static rules only: the boundary guard (kernel/data/
boundaries.py) catches at run time what code a test runs, and mypy what types say; a rule they make
unnecessary still shows here as the only one catching its cases, so its removal is argued from those, case by
case (docs/architecture-rules.md).

Measured (90ed6e5, 97 cases of 27 rules; 2 CPU minutes): two rules caught nothing the others did not,
`app_outside_the_process` (its 3 cases: reaches_past_the_door) and `migrations_touching_other_modules_tables`
(its 4: other_domains_tables); both were removed, their cases kept under the rule that catches them.
Measured again after the third review (32be3a5's checks on a57bec3's package, 157 cases of 27 rules; load average
1-7 on 2 cores, niced): none redundant; every rule catches at least one planted case no other does (the fewest, one
each: files_without_a_role, rows_read_by_key, sql_reached_outside_repositories).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
from collections import defaultdict

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import test_architecture as arch  # noqa: E402  (the rules and their planted cases)


def _planted_copy(base: pathlib.Path, n: int, file: str, code: str) -> pathlib.Path:
    copy = base / f"case{n}" / "persona_service"
    shutil.copytree(arch.PACKAGE, copy, copy_function=os.link,
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    planted = copy / file
    before = planted.read_text() if planted.exists() else ""
    if planted.exists():
        planted.unlink()  # a hard link to the checkout's file: write a new one
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(before + "\n\n" + code)
    return copy


def _names(found: list[str], file: str) -> bool:
    module = "persona_service." + file.removesuffix(".py").replace("/", ".")
    return file in str(found) or module in str(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", action="store_true", help="list each case and the other rules catching it")
    parser.add_argument("--rule", action="append", default=[], help="only this rule's cases")
    args = parser.parse_args()
    rules = list(arch.AST_RULES)
    cases = [(what, file, code, check) for what, file, code, check in arch.PLANTED
             if check in rules and (not args.rule or check.__name__ in args.rule)]
    alone: dict[str, list[str]] = defaultdict(list)
    shared: dict[str, list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for n, (what, file, code, check) in enumerate(cases):
            copy = _planted_copy(pathlib.Path(tmp), n, file, code)
            others = [rule.__name__ for rule in rules if rule is not check and _names(rule(copy), file)]
            (shared if others else alone)[check.__name__].append(f"{what}" + (f" (also: {', '.join(others)})"
                                                                              if others else ""))
            shutil.rmtree(copy.parent)
    print(f"{len(cases)} planted cases of {len(rules)} AST rules")
    for rule in sorted({check.__name__ for *_, check in cases}, key=lambda name: (len(alone[name]), name)):
        verdict = "redundant on what is planted" if not alone[rule] and shared[rule] else ""
        print(f"{rule:42} only it: {len(alone[rule]):3}  also another: {len(shared[rule]):3}  {verdict}")
        if args.cases:
            for case in alone[rule]:
                print(f"    only it: {case}")
            for case in shared[rule]:
                print(f"    shared:  {case}")


if __name__ == "__main__":
    main()
