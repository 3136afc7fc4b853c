"""The client stands alone: its own models match the server's OpenAPI document, and it
imports nothing of the server, so it installs with pydantic and httpx only."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import lcm_client.models as client_models
from tests.conftest import RecordingSender, settings_for

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "lcm_client"
SERVER_PACKAGES = ("lcm", "api", "workers", "cli")
# Bases and client-side wrappers the server's document has no schema for: the
# fields they declare are checked through the models that inherit them.
CLIENT_ONLY = {"BatchIn", "ModelIn", "RequestBody", "ScopeIn", "SkippedWrite"}
CLIENT_ONLY |= {"ExportOut", "NoContent"}  # what the client returns for JSONL and for 204


def _models() -> list[type[BaseModel]]:
    found = (getattr(client_models, name) for name in client_models.__all__)
    return [m for m in found if isinstance(m, type) and issubclass(m, BaseModel)]


def _normalized(value: Any) -> Any:
    """FastAPI's document drops ``default: null`` and writes numbers as floats."""
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if not (k == "default" and v is None)}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _client_schema(model: type[BaseModel]) -> tuple[str, Any]:
    """The name the server's document gives ``model``, and the client's schema for it."""
    request = issubclass(model, client_models.RequestBody)
    # A request is checked as the server validates it, a response as the server writes it.
    mode: JsonSchemaMode = "validation" if request else "serialization"
    _, schemas = models_json_schema([(model, mode)], ref_template="#/components/schemas/{model}")
    suffix = "-Input" if request else "-Output"
    return suffix, _normalized(schemas["$defs"][model.__name__])


@pytest.fixture(scope="module")
def server_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from api.app import create_app
    from lcm.db.engine import Database
    from workers.link import CeleryLink

    path = tmp_path_factory.mktemp("openapi") / "lcm.db"
    database = Database(settings_for(f"sqlite:///{path}"))
    try:
        app = create_app(
            database.settings, link=CeleryLink(), database=database, sender=RecordingSender()
        )
        schemas: dict[str, Any] = app.openapi()["components"]["schemas"]
    finally:
        database.dispose()
    return schemas


def _server_schema(schemas: dict[str, Any], name: str, suffix: str) -> Any:
    return _normalized(schemas.get(name + suffix, schemas.get(name)))


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_client_model_matches_the_servers_openapi_schema(
    model: type[BaseModel], server_schemas: dict[str, Any]
) -> None:
    name = model.__name__
    if name in CLIENT_ONLY:
        assert name not in server_schemas, f"{name} is in the server's document: check it"
        return
    suffix, mine = _client_schema(model)
    theirs = _server_schema(server_schemas, name, suffix)
    assert theirs is not None, f"the server's document has no {name}"
    assert mine == theirs


def test_the_comparison_sees_a_difference(server_schemas: dict[str, Any]) -> None:
    class TurnOut(client_models.TurnOut):
        extra_field: int = 0  # a field the server does not write

    suffix, mine = _client_schema(TurnOut)
    assert mine != _server_schema(server_schemas, "TurnOut", suffix)
    _, original = _client_schema(client_models.TurnOut)
    assert original == _server_schema(server_schemas, "TurnOut", suffix)


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_client_imports_nothing_of_the_server() -> None:
    offenders = {
        f"{path.relative_to(ROOT)}: {root}"
        for path in sorted(CLIENT.rglob("*.py"))
        for root in _imported_roots(path)
        if root in SERVER_PACKAGES
    }
    assert offenders == set()
    assert "lcm_client" in _imported_roots(CLIENT / "client.py")  # the walk sees imports


def _distribution() -> dict[str, Any]:
    with (ROOT / "clients" / "python" / "pyproject.toml").open("rb") as f:
        project: dict[str, Any] = tomllib.load(f)
    return project


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions ``requirements`` need, transitively (no extras)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() in seen:
            continue
        seen.add(req.name.lower())
        todo.extend(Requirement(r) for r in metadata.requires(req.name) or [])
    return seen


def _top_level(distribution: str) -> set[Path]:
    """The top-level packages and modules a distribution installed, as paths."""
    dist = metadata.distribution(distribution)
    tops = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first.endswith((".dist-info", ".pth")) or first in ("..", "__pycache__"):
            continue
        tops.add(Path(str(dist.locate_file(first))))
    return tops


def test_the_client_imports_with_only_its_declared_dependencies(tmp_path: Path) -> None:
    declared = _distribution()["project"]["dependencies"]
    assert {Requirement(r).name for r in declared} == {"pydantic", "httpx"}
    (tmp_path / "lcm_client").symlink_to(CLIENT)
    for name in _closure(declared):
        for top in _top_level(name):
            if not (tmp_path / top.name).exists():
                (tmp_path / top.name).symlink_to(top)
    probe = (
        "import importlib.util, json, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import lcm_client, lcm_client.models\n"
        "from lcm_client.models import MessageIn\n"
        "MessageIn(role='user', content='hi')\n"
        "server = ('fastapi', 'sqlalchemy', 'celery', 'lcm', 'api', 'workers', 'cli')\n"
        "print(json.dumps({'loaded': sorted(m for m in server if m in sys.modules),\n"
        "  'importable': sorted(m for m in server if importlib.util.find_spec(m))}))\n"
    )
    # -I: no user site, no PYTHON* variables, not the working directory; -S: no
    # site-packages either, so only the standard library and the directory built above.
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"loaded": [], "importable": []}


def test_the_distribution_ships_the_client_package() -> None:
    project = _distribution()
    setuptools = project["tool"]["setuptools"]
    package_root = (ROOT / "clients" / "python" / setuptools["package-dir"][""]).resolve()
    assert package_root == ROOT
    packages = {p.parent.relative_to(ROOT).as_posix() for p in CLIENT.rglob("__init__.py")}
    assert {p.replace(".", "/") for p in setuptools["packages"]} == packages
    version = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert version == "lcm_client.version.__version__"
    from lcm import __version__ as server_version
    from lcm_client.version import __version__

    assert __version__ == server_version  # released together, from one repository
