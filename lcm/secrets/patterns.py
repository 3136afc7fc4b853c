"""Hand-written patterns, each for a format no ``detect-secrets`` plugin covers (1.5.0).

A pattern's first group, when it has one, is the value; otherwise the whole
match is. Patterns start with a literal where they can: ``re`` then skips
ahead to it instead of trying the pattern at every position.
"""

from __future__ import annotations

import re

HAND_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic keys (``sk-ant-api03-…``, ``sk-ant-admin01-…``): no plugin knows them.
    (re.compile(r"sk-ant-[a-z]+\d{2}-[A-Za-z0-9_-]{40,200}"), "anthropic_key"),
    # OpenAI project, service-account and admin keys: the plugin only matches keys
    # carrying the ``T3BlbkFJ`` marker, which newer keys may lack.
    (re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,250}"), "openai_key"),
    # GitHub fine-grained tokens: the plugin knows the ``ghp_``-style ones only.
    (re.compile(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}\b"), "github_token"),
    # npm access tokens on their own: the plugin wants them in an ``.npmrc`` line.
    (re.compile(r"npm_[A-Za-z0-9]{36}\b"), "npm_token"),
    # A URL password with an empty user (``redis://:pw@host``): the plugin wants a user.
    (re.compile(r"://:([^\s:/?#@]{3,256})@"), "password_in_url"),
    # Google API keys: no plugin.
    (re.compile(r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), "google_api_key"),
    # An opaque token in an Authorization header (``curl -H``, HTTP dumps): the
    # JWT plugin only knows JWTs, and the keyword plugin wants ``key = "value"``.
    # (Case by hand, not IGNORECASE: a literal start lets ``re`` skip ahead.)
    (
        re.compile(
            r"[Aa]uthorization[ \t]*[:=][ \t]*[\"']?(?:[Bb]earer|[Tt]oken|[Bb]asic)[ \t]+"
            r"([A-Za-z0-9._~+/=-]{8,4096})"
        ),
        "bearer_token",
    ),
)

# ``NAME=value`` with a secret-like name and an unquoted value (``.env`` lines,
# ``env`` dumps, ``docker run -e``, ``PGPASSWORD=… psql``): the keyword plugin
# reads unquoted values only in YAML mode, where it takes the rest of the line
# (``hunter2 psql -h db``). The value runs to the next blank; the name is read
# backwards from the ``=`` (``lcm.secrets.detector``), so ``re`` never tries a
# name at every position.
UNQUOTED_VALUE_RE = re.compile(r"=(?![\"'$<{\s])(\S{6,1024})")
SECRET_NAME_RE = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL"
)

# A PEM private key's header and end lines. The plugin flags the ``BEGIN`` line
# only; the key is the body between them, found by ``lcm.secrets.detector``
# (a header without an end within ``PEM_MAX_CHARS`` is masked to its last key
# line). Both match the lines written with ``\n`` escapes in a JSON string too.
PEM_BEGIN_RE = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PEM_END_RE = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
PEM_MAX_CHARS = 20_000
