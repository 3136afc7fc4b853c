"""Finding secrets in text: ``detect-secrets``' plugins, located to the character.

The regex plugins of ``detect-secrets`` run over the whole text (their
patterns stay inside one line), so each match comes with its offsets. A
plugin's capturing group names the value when it captures it (the password
of a URL, an AWS secret key in quotes); a group that only captures a prefix
(``ghp``) is ignored and the whole match is the value. The keyword plugin
runs per line, on lines naming a secret-like key, and its value is located
in the line. Offsets are in code points (Python ``str`` indices), end
exclusive.

Plugins left out: ``IPPublicDetector`` (an address is not a secret),
``HexHighEntropyString`` (in agent transcripts a hex string is a hash or a
commit id) and ``Base64HighEntropyString``'s eager mode, which flags every
word; high entropy is judged here on assignment values only, with the
plugin's own entropy measure.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from detect_secrets.filters.heuristic import (
    is_potential_uuid,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from lcm.secrets.patterns import (
    HAND_PATTERNS,
    PEM_BEGIN_RE,
    PEM_END_RE,
    PEM_MAX_CHARS,
    SECRET_NAME_RE,
    UNQUOTED_VALUE_RE,
)
from lcm.secrets.plugins import GATED

if TYPE_CHECKING:
    from lcm.secrets.rules import DetectionRules

# What stored spans were found with. Bump it when a change here finds more,
# fewer or other spans: ``lcm secrets scan`` re-scans what an older version found.
DETECTOR_VERSION = "2026.11.2"

# Kinds a more specific finding wins over when two overlap.
GENERIC_KINDS = frozenset({"credential", "high_entropy", "bearer_token"})
_KEYWORD = KeywordDetector()
_ENTROPY = Base64HighEntropyString()
# The gate before any pattern runs (``_may_hold_secret``). Artifactory keys the
# plugin would take from 11 characters are 64+ in practice.
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")
# Words the keyword plugin's names contain (``api_?key``, ``passwd``, ``contraseña``…),
# with ``token``, ``auth`` and ``credential`` for the hand-written name rules.
_HINTS = ("pass", "pwd", "secret", "key", "token", "auth", "credential", "contrase")
# A quoted value after an assignment: the only values the keyword plugin finds.
_QUOTED_VALUE = re.compile(r"""(?:=|:|=>)[ \t]*["']""")
# An opaque value after ``=`` or ``:``, possibly quoted: a high-entropy candidate
# when the run of value characters from there is 20-512 long (``_opaque_values``).
_SIGN = re.compile(r"""[:=][ \t]*["']?""")
_VALUE_RUN = re.compile(r"[A-Za-z0-9+/_=.~-]+")
# The name an assignment ends with, matched on the reversed text before its sign
# (a forward search ending at the sign would try every start in the window).
_NAME_BEFORE_REVERSED = re.compile(r"""[ \t]*["']?([A-Za-z0-9_.-]{1,61})""")
# Names whose values are identifiers or digests, never secrets, however random they look.
_NOT_SECRET_NAME = re.compile(
    r"(hash|sha\d*|md5|digest|checksum|integrity|etag|commit|rev|revision|uuid|guid|ids?"
    r"|image|data|nonce|version|path|url|uri|file|name|ref|tag|branch)$",
    re.IGNORECASE,
)
# The lines of a PEM body after its header: base64, or ``Proc-Type:``-style headers.
_PEM_BODY = re.compile(r"(?:\r?\n(?:[A-Za-z0-9+/=]{4,}|[A-Za-z-]+: [^\n]*))*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_=+/.-]*")
_HEX = re.compile(r"[0-9a-fA-F]+")
# Ids of model APIs (tool calls, messages, requests): random, public, everywhere in transcripts.
_ID_PREFIXES = ("toolu_", "srvtoolu_", "msg_", "req_", "call_", "chatcmpl-", "resp_", "fc_")
# A file path with an extension (``/tmp/tmp-2101-KUbIvUViN7hm/pull.patch``).
_PATH = re.compile(r"(?:~|\.{1,2})?/(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,8}")
_PLACEHOLDER = "..."
# Random base64 of 20-64 characters measures 0.85-0.95 of log2(length); words,
# paths and version strings measure less and rarely mix all three classes.
_ENTROPY_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret in a text: ``text[start:end]`` is its value (code points)."""

    start: int
    end: int
    kind: str

    @property
    def length(self) -> int:
        return self.end - self.start


def detect(text: str, rules: DetectionRules | None = None) -> list[Finding]:
    """The secrets in ``text``, sorted by offset, none overlapping another.

    ``rules`` (a tenant's custom patterns and allow-list) add findings and
    drop the allow-listed ones.
    """
    found: list[Finding] = []
    if len(text) >= 8 and _may_hold_secret(text):
        found = [*_plugin_findings(text), *_hand_findings(text), *_line_findings(text)]
    if rules is None:
        return _disjoint(found)
    found.extend(rules.custom_findings(text))
    return rules.allowed_out(text, _disjoint(found))


def _may_hold_secret(text: str) -> bool:
    """False when no pattern here can match: most short messages skip ~40 regex passes.

    Every key, token and high-entropy value is a run of 16+ token characters;
    a URL password needs ``://`` and ``@``; keyword, ``NAME=value``, header
    and PEM findings need one of ``_HINTS`` in the text.
    """
    if _LONG_TOKEN.search(text) or ("://" in text and "@" in text):
        return True
    lowered = text.lower()
    return any(hint in lowered for hint in _HINTS)


def _plugin_findings(text: str) -> Iterator[Finding]:
    lowered = text.lower()
    for plugin, kind, hints, gate in GATED:
        if hints is not None and hints.search(lowered) is None:
            continue
        if gate is not None and gate.search(text) is None:
            continue
        for regex in plugin.denylist:
            for match in regex.finditer(text):
                start, end = _value_span(match, kind)
                if kind == "jwt":
                    # The plugin's pattern ends lazily, before the signature: take it whole.
                    end = _JWT_TAIL.match(text, end).end()  # type: ignore[union-attr]
                if end > start:
                    yield Finding(start, end, kind)


def _value_span(match: re.Match[str], kind: str) -> tuple[int, int]:
    """The value's span: the longest group when it captures the value, else the match."""
    groups = [i for i in range(1, (match.re.groups or 0) + 1) if match.group(i)]
    if groups:
        longest = max(groups, key=lambda i: match.end(i) - match.start(i))
        # A group of a few characters is a prefix alternation (``(ghp|gho)_…``).
        if kind == "password_in_url" or match.end(longest) - match.start(longest) >= 8:
            return match.start(longest), match.end(longest)
    return match.start(), match.end()


def _hand_findings(text: str) -> Iterator[Finding]:
    for pattern, kind in HAND_PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span(1) if pattern.groups else match.span()
            yield Finding(start, end, kind)
    yield from _pem_blocks(text)
    if "PRIVATE KEY" in text or "PuTTY" in text:
        # A header without its END line (a truncated paste): the header and the
        # key lines after it (the plugin flags the header's words only).
        for regex in PrivateKeyDetector.denylist:
            for match in regex.finditer(text):
                start = match.start()
                if text[max(0, start - 5) : start] == "-----":
                    start -= 5
                end = _PEM_BODY.match(text, _line_end(text, match.end())).end()  # type: ignore[union-attr]
                yield Finding(start, end, "private_key")


def _pem_blocks(text: str) -> Iterator[Finding]:
    """Whole PEM private key blocks, header to end line.

    The end is looked for with ``str.find`` within ``PEM_MAX_CHARS`` of the
    header: a lazy pattern would walk that window character by character
    for every header without an end.
    """
    at = 0
    while (begin := PEM_BEGIN_RE.search(text, at)) is not None:
        at = begin.end()
        cut = text.find("-----END ", at, at + PEM_MAX_CHARS)
        end = PEM_END_RE.match(text, cut) if cut >= 0 else None
        if end is not None:
            yield Finding(begin.start(), end.end(), "private_key")
            at = end.end()


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _name_before(text: str, at: int) -> str:
    """The name of the assignment whose ``=``/``:`` is at ``at`` ("" when none)."""
    match = _NAME_BEFORE_REVERSED.match(text[max(0, at - 70) : at][::-1])
    return match.group(1)[::-1] if match else ""


def _line_findings(text: str) -> Iterator[Finding]:
    """Assignments: the keyword plugin's quoted values, unquoted secret settings, opaque values.

    Each pass finds the assignment's sign first and reads the name back
    from it, so the name is never tried at every position of the text.
    """
    keyword_lines: set[int] = set()
    for match in _QUOTED_VALUE.finditer(text):
        name = _name_before(text, match.start()).lower()
        if any(hint in name for hint in _HINTS):  # a cheap test before its ~30 regexes
            keyword_lines.add(text.rfind("\n", 0, match.start()) + 1)
    for at in sorted(keyword_lines):
        line = text[at : _line_end(text, at)]
        for secret in _KEYWORD.analyze_line(filename="message", line=line):
            value = str(secret.secret_value or "")
            index = line.find(value) if value else -1
            if index >= 0:
                yield Finding(at + index, at + index + len(value), "credential")
    for match in UNQUOTED_VALUE_RE.finditer(text):
        if _PLACEHOLDER in match.group(1) or "\u2026" in match.group(1):
            continue  # ``OPENAI_API_KEY=sk-...``: documentation, not a key
        if SECRET_NAME_RE.search(_name_before(text, match.start()).upper()):
            yield Finding(match.start(1), match.end(1), "credential")
    for sign, start, end in _opaque_values(text):
        if _is_code(text, sign, end):
            continue
        if _high_entropy(_name_before(text, sign), text[start:end]):
            yield Finding(start, end, "high_entropy")


def _is_code(text: str, sign: int, end: int) -> bool:
    """A comparison (``==``, ``!=``, ``<=``, ``>=``) or a call (``x := NewEnv(t)``), not a setting.

    Found by the untuned-data check (docs/secrets.md): Go and Python source in
    tool output flagged identifiers such as ``NewE2EFeatureBranchEnv``.
    """
    return (
        text[sign - 1 : sign] in ("=", "!", "<", ">")
        or text[sign + 1 : sign + 2] == "="
        or text[end : end + 1] == "("
    )


def _opaque_values(text: str) -> Iterator[tuple[int, int, int]]:
    """(sign, start, end) of each run of 20-512 value characters after ``=`` or ``:``.

    Linear: a sign inside a run already measured shares its end (a pattern
    retried from every ``=`` of ``a=a=a=…`` took 1 s for 200 KB).
    """
    run_end = -1
    for sign in _SIGN.finditer(text):
        start = sign.end()
        if start >= run_end:
            run = _VALUE_RUN.match(text, start)
            if run is None:
                continue
            run_end = run.end()
        if 20 <= run_end - start <= 512:
            yield sign.start(), start, run_end


def _high_entropy(name: str, value: str) -> bool:
    """Whether an assignment's value looks like a random secret (and not an id or digest)."""
    if _NOT_SECRET_NAME.search(name) or _HEX.fullmatch(value):
        return False
    if "=" in value.rstrip("=") or value.startswith(_ID_PREFIXES) or _PATH.fullmatch(value):
        return False  # ``run = "E2E_AGENT=claude-code"``, ``toolu_…`` ids, ``/tmp/…/x.patch``
    if value.startswith(("sha1-", "sha256-", "sha384-", "sha512-")):
        return False  # subresource/npm integrity digests
    if is_potential_uuid(value) or is_sequential_string(value) or is_templated_secret(value):
        return False
    classes = sum(
        1 for test in (str.isupper, str.islower, str.isdigit) if any(test(c) for c in value)
    )
    # The most a string of n characters can reach is log2(n): the bar is a share of it.
    limit = _ENTROPY_SHARE * math.log2(min(len(value), 64))
    return classes >= 3 and _ENTROPY.calculate_shannon_entropy(value) > limit


def _disjoint(found: list[Finding]) -> list[Finding]:
    """Overlapping findings resolved: a specific kind beats a generic one, then the longer.

    The kept findings are disjoint, so a candidate need only be checked
    against its neighbours by start (bisect): n log n, for texts with
    hundreds of findings.
    """
    starts: list[int] = []
    kept: list[Finding] = []  # in start order, like ``starts``
    for finding in sorted(set(found), key=lambda f: (f.kind in GENERIC_KINDS, -f.length, f.start)):
        at = bisect.bisect_left(starts, finding.start)
        if at > 0 and kept[at - 1].end > finding.start:
            continue
        if at < len(kept) and kept[at].start < finding.end:
            continue
        starts.insert(at, finding.start)
        kept.insert(at, finding)
    return kept
