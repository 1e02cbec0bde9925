"""Typed data across layers (issue 47): a repository takes typed parameters or records (`New<Thing>`,
`<Thing>Changes` in its domain's records.py), never a bag of column names (`**values: Any`), so column names
live in the repository and no service can name one; a service takes no such bag either (it would hand it on)."""

from __future__ import annotations

import ast
import pathlib
import shutil

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "server" / "persona_service"
# A bag: `**name` whose values could be anything.
UNTYPED = {"Any", "typing.Any", "object"}

# Files that still take a bag, each with why; `test_the_allow_list_is_not_stale` fails once one no longer does
# (drop its line then).
STILL_UNTYPED: dict[str, str] = {}


def _takes_a_bag(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    bag = node.args.kwarg
    return bag is not None and (bag.annotation is None or ast.unparse(bag.annotation) in UNTYPED)


def bags_of_columns(root: pathlib.Path) -> dict[str, list[str]]:
    """Repository and service files (by name, the domains' and the kernel's) -> their functions taking a bag."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if not path.name.endswith(("repository.py", "service.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _takes_a_bag(node):
                found.setdefault(path.relative_to(root).as_posix(), []).append(f"{node.name} (line {node.lineno})")
    return found


def test_no_repository_or_service_takes_a_bag_of_columns():
    found = {path: names for path, names in bags_of_columns(PACKAGE).items() if path not in STILL_UNTYPED}
    assert not found, f"take typed parameters or a record (records.py), not **values: Any: {found}"


def test_the_allow_list_is_not_stale():
    assert set(STILL_UNTYPED) <= set(bags_of_columns(PACKAGE)), "typed now: drop it from STILL_UNTYPED"


def _planted(tmp_path: pathlib.Path, file: str, code: str) -> pathlib.Path:
    """A tree holding `file` as it is, with `code` appended."""
    root = tmp_path / "persona_service"
    (root / file).parent.mkdir(parents=True)
    shutil.copy(PACKAGE / file, root / file)
    with (root / file).open("a") as f:
        f.write(code)
    return root


def test_a_planted_bag_is_caught(tmp_path):
    cases = {
        "billing/repository.py": "\n\ndef planted(self, **values: Any) -> None:\n    pass\n",
        "orgs/keys_repository.py": "\n\nclass Planted:\n    def add(self, **kwargs) -> None:\n        pass\n",
        "portraits/service.py": "\n\ndef planted(**values: object) -> None:\n    pass\n",
    }
    for file, code in cases.items():
        root = _planted(tmp_path / file.replace("/", "_"), file, code)
        assert file in bags_of_columns(root), file


def test_typed_keywords_are_not_a_bag(tmp_path):
    root = _planted(tmp_path, "billing/repository.py", "\n\ndef typed(self, *, plan: str, **labels: str) -> None:\n"
                                                        "    pass\n")
    assert "billing/repository.py" not in bags_of_columns(root)
