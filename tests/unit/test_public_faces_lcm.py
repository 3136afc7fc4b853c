"""Each `lcm/` folder's `__init__` names, in `__all__`, what others may use.

Other folders and the entry points (`api`, `workers`, `cli`) import only
names a folder lists, from the folder or from the module that defines them;
the folder re-exports each of them (`lcm.exports.lazy_exports`), and the
re-export is the very object its module defines.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LCM = ROOT / "lcm"
ENTRY_POINTS = ("api", "workers", "cli")
FOLDERS = sorted(p.name for p in LCM.iterdir() if (p / "__init__.py").is_file())


def _folder(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "lcm" and len(parts) > 1 and parts[1] in FOLDERS:
        return parts[1]
    return None


def _importer_folder(path: Path) -> str | None:
    """The `lcm` folder a file is in; None for ground modules and entry points."""
    parts = path.relative_to(ROOT).parts
    return parts[1] if parts[0] == "lcm" and parts[1] in FOLDERS else None


def cross_folder_imports() -> list[tuple[str, str, str, int]]:
    """(folder, name, importing file, line) of every `from lcm.<folder>... import name`
    written outside that folder, in `lcm` or an entry point."""
    found: list[tuple[str, str, str, int]] = []
    for top in ("lcm", *ENTRY_POINTS):
        for path in sorted((ROOT / top).rglob("*.py")):
            here = _importer_folder(path)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                folder = _folder(node.module)
                if folder is None or folder == here:
                    continue
                rel = str(path.relative_to(ROOT))
                found.extend((folder, alias.name, rel, node.lineno) for alias in node.names)
    return found


def test_cross_folder_imports_name_only_what_a_folder_exports() -> None:
    missing = [
        f"{file}:{line}: {name} is not in lcm.{folder}.__all__"
        for folder, name, file, line in cross_folder_imports()
        if name not in importlib.import_module(f"lcm.{folder}").__all__
    ]
    assert not missing, "\n".join(missing)


def test_the_finder_sees_imports_from_other_folders_and_entry_points() -> None:
    found = {(folder, name, file) for folder, name, file, _ in cross_folder_imports()}
    assert ("policy", "split_fresh_tail", "lcm/assembly/assembler.py") in found
    assert ("db", "Database", "lcm/services.py") in found
    assert any(file.startswith("api/") for _, _, file in found)
    # Imports inside a folder are its own business.
    assert not any(file.startswith(f"lcm/{folder}/") for folder, _, file in found)


def _typed_sources(folder: str) -> dict[str, str]:
    """Name -> module of the `__init__`'s imports (those mypy reads, under TYPE_CHECKING)."""
    tree = ast.parse((LCM / folder / "__init__.py").read_text())
    return {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "lcm.exports"
        for alias in node.names
        if node.module != "__future__" and node.module != "typing"
    }


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_exported_name_is_the_object_its_module_defines(folder: str) -> None:
    package = importlib.import_module(f"lcm.{folder}")
    exported = package.__all__
    assert exported, f"lcm.{folder} names nothing in __all__"
    assert sorted(exported) == sorted(set(exported))
    sources = _typed_sources(folder)
    assert sorted(sources) == sorted(exported), "the typed imports and __all__ differ"
    for name in exported:
        module = importlib.import_module(sources[name])
        expected = getattr(module, name, None)
        if expected is None:  # `from lcm.retrieval import grep`: the submodule itself
            expected = importlib.import_module(f"{sources[name]}.{name}")
        assert getattr(package, name) is expected, f"lcm.{folder}.{name}"


def test_a_name_a_folder_does_not_export_is_an_attribute_error() -> None:
    package = importlib.import_module("lcm.compaction")
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = package.not_a_name


def test_importing_a_folder_imports_none_of_its_modules() -> None:
    """Faces are lazy: the contract models' session-key rule loads no database code."""
    probe = (
        "import sys, json, lcm.conversations.session_keys, lcm.tenants, lcm.db; "
        "print(json.dumps(sorted(m for m in ('sqlalchemy', 'lcm.db.engine', "
        "'lcm.conversations.repository', 'lcm.tenants.keys') if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
