"""A folder's public face, imported on first use.

Each folder under ``lcm/`` names in its ``__init__``'s ``__all__`` what other
folders and the entry points (``api``, ``workers``, ``cli``) may use, and
re-exports those names through :func:`lazy_exports`: importing the folder, or
one of its modules, imports nothing else until a re-exported name is read.
So a light caller (the contract models' session-key rule) does not load the
folder's database code, and the faces add no import-order constraints between
folders beyond those their modules already have.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, sources: Mapping[str, Sequence[str]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` (PEP 562): each name from its module.

    ``sources`` maps a module to the names it provides; a name equal to the
    last part of its module's path is that module itself (a submodule named
    after its one function, e.g. ``lcm.retrieval.grep``). A name once read is
    stored on the package, so later reads are plain attribute lookups.
    """
    where = {name: module for module, names in sources.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module == f"{package}.{name}" else getattr(loaded, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
