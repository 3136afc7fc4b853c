"""The docs stay true: the configuration table is the settings class, named paths exist,
and CI runs the test command the README gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic.fields import FieldInfo

from lcm.settings import Settings, TenantSettings

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \| (.*?) \| (.*) \|$")


def _env_name(name: str, field: FieldInfo) -> str:
    alias = field.validation_alias
    return alias if isinstance(alias, str) else f"LCM_{name.upper()}"


def _documented() -> dict[str, tuple[str, str]]:
    """Variable -> (section heading, default cell) from docs/configuration.md."""
    rows: dict[str, tuple[str, str]] = {}
    section = ""
    for line in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif match := ROW.match(line):
            variable, default, meaning = match.groups()
            assert variable not in rows, f"{variable} is listed twice"
            assert meaning.strip(), f"{variable} has no meaning"
            rows[variable] = (section, default)
    return rows


def test_configuration_lists_every_setting_and_nothing_else() -> None:
    documented = _documented()
    fields = Settings.model_fields
    assert set(documented) == {_env_name(name, field) for name, field in fields.items()}


def test_configuration_sections_say_what_a_tenant_may_override() -> None:
    documented = _documented()
    for name, field in Settings.model_fields.items():
        section, _ = documented[_env_name(name, field)]
        per_tenant = name in TenantSettings.model_fields
        assert section.endswith("(per tenant)") == per_tenant, name


def test_configuration_literal_defaults_are_the_codes() -> None:
    documented = _documented()
    checked = 0
    for name, field in Settings.model_fields.items():
        _, cell = documented[_env_name(name, field)]
        default = field.get_default(call_default_factory=True)
        if cell == "unset":
            assert default is None, name
        elif cell.startswith("`") and cell.endswith("`") and not isinstance(default, Path):
            if default in ("", None):
                continue  # derived when read: the cell names where it comes from
            assert json.loads(cell.strip("`")) == default, name
            checked += 1
    assert checked > 60


# A backticked token that names a file or folder of the repository: a path
# with a slash or a file name with one of these endings.
PATHLIKE = re.compile(r"^[\w.\-]+(/[\w.\-]+)*/?$")
ENDINGS = (".py", ".md", ".toml", ".yml", ".yaml", ".json", ".ts", ".html", ".cfg", ".ini")
ROOT_ENTRIES = {p.name for p in ROOT.iterdir()}


def _tokens(line: str) -> list[str]:
    # ``api/deps.py get_session`` names a function in a file: the path is its first word.
    return [token.split(" ")[0] for token in re.findall(r"`([^`\n]+)`", line)]


def _named_paths(text: str, label: str) -> list[tuple[str, Path]]:
    """(where, the path it names) for every repository path ``text`` names in backticks.

    In a table row whose first cell is a folder (``lcm/db/``), a file name
    (``engine.py``, ``tasks/``) is that folder's.
    """
    named = []
    for number, line in enumerate(text.splitlines(), 1):
        tokens = _tokens(line)
        folder = None
        if line.startswith("| `") and tokens and tokens[0].endswith("/"):
            folder = tokens[0]
        for token in tokens:
            if not PATHLIKE.match(token) or token.startswith("."):
                continue
            where = f"{label}:{number} {token}"
            if "/" in token and token.split("/")[0] in ROOT_ENTRIES:
                named.append((where, ROOT / token))
            elif folder and token.endswith((*ENDINGS, "/")):
                named.append((where, ROOT / folder / token))
    return named


def test_every_path_the_docs_name_exists() -> None:
    named = [
        item
        for doc in DOCS
        for item in _named_paths(doc.read_text(encoding="utf-8"), str(doc.relative_to(ROOT)))
    ]
    missing = [where for where, path in named if not path.exists()]
    assert missing == []
    assert len(named) > 50  # the walk finds the paths (ARCHITECTURE.md alone names dozens)


def test_every_relative_link_of_the_docs_resolves() -> None:
    links = [
        (f"{doc.relative_to(ROOT)} {target}", (doc.parent / target.split("#")[0]).resolve())
        for doc in DOCS
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8"))
        if "://" not in target and not target.startswith(("#", "mailto:"))
    ]
    assert [where for where, path in links if not path.exists()] == []
    assert len(links) > 10  # README's "where to go next" alone has nine


def test_a_stale_path_is_found() -> None:
    text = "| `api/` | `contract.py`, `app.py` |\nsee `lcm/nowhere.py`, `text/plain`, `/v1/x`"
    named = _named_paths(text, "probe")
    assert {w.split(" ")[-1] for w, path in named if not path.exists()} == {
        "contract.py",
        "lcm/nowhere.py",
    }
    assert len(named) == 4  # api/ and app.py exist; a media type, a URL path are no paths


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2  # install and serve; the test command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci
