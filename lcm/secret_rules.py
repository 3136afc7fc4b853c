"""The shape of the operator's secret controls (settings fields), checked whole.

Kept apart from :mod:`lcm.settings` only for size; :mod:`lcm.secrets.rules`
applies them. Three controls, each a global default (``LCM_…``) a tenant
may override:

- ``secrets_custom_patterns``: extra patterns, each with the kind its
  findings get. They run on RE2 (``google-re2``), whose matching time is
  linear in the text: a pathological pattern (``(a+)+$``) cannot stall
  ingest, and what RE2 cannot run in linear time (backreferences,
  lookaround) is refused when the setting is written.
- ``secrets_allow_list``: values never masked (a documented test key, a
  placeholder a team shares). Stored as ``sha256:<hex>`` of the value: a
  plain value given is hashed when the setting is validated, so reading the
  settings back (or the audit log) shows only hashes. Unsalted on purpose:
  the same value must hash the same in every process, and a value put on
  the allow-list is declared not secret, so confirming a guess of it by its
  hash reveals nothing.
- ``secrets_unmasked_surfaces``: surfaces whose text leaves unmasked.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lcm.re2_engine import RefusedPattern, compile_linear

SecretSurface = Literal["summarizer", "assemble", "grep", "describe", "export", "console"]
SECRET_SURFACES: tuple[SecretSurface, ...] = (
    "summarizer",
    "assemble",
    "grep",
    "describe",
    "export",
    "console",
)
MAX_CUSTOM_PATTERNS = 50
MAX_PATTERN_CHARS = 500
MAX_ALLOW_LIST = 1_000
# RE2's memory for one compiled pattern: a pattern needing more (a huge
# counted repetition) is refused rather than silently falling back.
_RE2_MAX_MEM = 8 << 20
_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")
_HASHED = re.compile(r"sha256:[0-9a-f]{64}")


def compile_secret_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (``ValueError`` saying why when it cannot be)."""
    try:
        compiled = compile_linear(pattern, _RE2_MAX_MEM)
    except RefusedPattern as exc:
        raise ValueError(
            f"pattern refused by RE2 ({exc.detail}); backreferences and lookaround cannot run in "
            "linear time"
        ) from exc
    if compiled.search("") is not None:
        raise ValueError("pattern matches the empty string: it would match everywhere")
    if compiled.groups > 1:
        raise ValueError("at most one capturing group (the value); use (?:…) for the others")
    return compiled


def allow_list_hash(value: str) -> str:
    """How an allow-listed value is stored and compared: ``sha256:<hex>`` of its UTF-8."""
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest}"


class SecretPattern(BaseModel):
    """One custom pattern: findings of ``pattern`` (its group, when it has one) are ``kind``."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1, max_length=40)
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)

    @field_validator("kind")
    @classmethod
    def _kind_word(cls, value: str) -> str:
        if not _KIND.fullmatch(value):
            raise ValueError("a kind is lowercase letters, digits and _ (1-40, a letter first)")
        return value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        compile_secret_pattern(value)
        return value


def hashed_allow_list(values: list[str]) -> list[str]:
    """Each value as its ``sha256:`` hash (one already hashed kept), deduplicated in order."""
    out: list[str] = []
    for value in values:
        if not value:
            raise ValueError("an allow-listed value must not be empty")
        hashed = value if _HASHED.fullmatch(value) else allow_list_hash(value)
        if hashed not in out:
            out.append(hashed)
    return out


class SecretControls(BaseSettings):
    """The secret settings a tenant may override (a base of ``CompactionSettings``)."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    # Assembled messages carry placeholders (``[secret:aws_key#1]``) where a
    # secret was detected; ``pass`` sends the stored text (docs/secrets.md).
    # The same as naming ``assemble`` in ``secrets_unmasked_surfaces``.
    assemble_secrets: Literal["mask", "pass"] = "mask"
    secrets_custom_patterns: list[SecretPattern] = Field(
        default_factory=list, max_length=MAX_CUSTOM_PATTERNS
    )
    secrets_allow_list: list[str] = Field(default_factory=list, max_length=MAX_ALLOW_LIST)
    secrets_unmasked_surfaces: list[SecretSurface] = Field(
        default_factory=list, max_length=len(SECRET_SURFACES)
    )

    @field_validator("secrets_allow_list")
    @classmethod
    def _allow_list_hashed(cls, value: list[str]) -> list[str]:
        return hashed_allow_list(value)

    def masks_secrets(self, surface: SecretSurface) -> bool:
        """Whether text leaving through ``surface`` has its secrets masked."""
        if surface == "assemble" and self.assemble_secrets == "pass":
            return False
        return surface not in self.secrets_unmasked_surfaces


__all__ = [
    "MAX_ALLOW_LIST",
    "MAX_CUSTOM_PATTERNS",
    "MAX_PATTERN_CHARS",
    "SECRET_SURFACES",
    "SecretControls",
    "SecretPattern",
    "SecretSurface",
    "allow_list_hash",
    "compile_secret_pattern",
    "hashed_allow_list",
]
