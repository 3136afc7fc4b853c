"""What a prompt asks about, read without a database (unit-tested alone).

Two readings of the prompt an assemble call carries (the user's current
message):

* :func:`relevance_query`: its words as one full-text query, any word
  matching (``a OR b OR …``), for grep's full-text relevance to rank the
  context's items by (prompt-aware eviction). English stop words are left
  out here so both databases rank alike (Postgres drops them itself, FTS5
  would not). ``None`` when nothing searchable is left.
* :func:`recall_identifiers`: the exact names it mentions, the kind that
  summaries lose: CONSTANT_CASE names (``ORBIT_RELAY_PORT``), paths
  (``deploy/nginx/site.conf``) and ticket ids (``OPS-1234``). Names that look
  like secrets (``AWS_SECRET_ACCESS_KEY``, ``*_TOKEN``, ``*_PASSWORD``,
  ``~/.ssh/id_rsa``) are never looked up, and a sentence found for another
  name is dropped if it carries a secret-like name or value.

And one reading of a grep pattern: :func:`keywords_query`, hybrid grep's
full-text side, the pattern's keywords any of which may match.
"""

from __future__ import annotations

import re
import string

from lcm.retrieval.query import Term, TextQuery, parse_text_query

MAX_QUERY_TERMS = 24
MAX_PROMPT_CHARS = 20_000  # only the start of a long prompt is read
MAX_IDENTIFIERS = 4
MAX_IDENTIFIER_CHARS = 200  # a longer "name" is pasted data, not something to look up
MAX_SNIPPET_CHARS = 400
MAX_MEANING_CHARS = 16_000  # what is embedded of a message (16 chunks of ~1,000 characters)

_WORD = re.compile(r"[^\W_]{2,}")
# English stop words and question words: what a question is made of besides
# the things it asks about.
STOP_WORDS = frozenset(
    """
    a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each
    few for from further had has have having he her here hers him his how i if in into
    is it its itself just let me more most my no nor not now of off on once only or
    other our ours out over own please same she should so some such than that the their
    theirs them then there these they this those through to too under until up us very
    was we were what when where which while who whom why will with would you your yours
    tell show give know think remember earlier again said say
    """.split()  # noqa: SIM905 (a word list)
)

_CONSTANT_CASE = r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"
_TICKET = r"\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b"
_PATH = r"(?<![\w/.~:-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w"
_IDENTIFIER = re.compile(f"{_CONSTANT_CASE}|{_TICKET}|{_PATH}")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")

# A segment of a name (split at _ . / -) that makes it secret-like; for paths
# also the usual homes of keys and passwords (``~/.ssh/id_rsa``, ``.env``).
_SECRET_SEGMENTS = frozenset(
    """
    SECRET SECRETS TOKEN TOKENS PASSWORD PASSWORDS PASSWD PASS PWD PASSPHRASE KEY KEYS
    APIKEY ACCESSKEY AUTHTOKEN CREDENTIAL CREDENTIALS CREDS AUTH COOKIE COOKIES PRIVATE
    SALT
    """.split()  # noqa: SIM905 (a word list)
)
_SECRET_PATH_SEGMENTS = frozenset(
    """
    ENV SSH GNUPG NETRC PGPASS HTPASSWD KEYSTORE PEM P12 PFX RSA DSA ECDSA ED25519
    """.split()  # noqa: SIM905 (a word list)
)
_SECRET_VALUE = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9_]{10,}"
    r"|\bgithub_pat_\w{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\b(?:sk|rk|pk)[-_][A-Za-z0-9_-]{10,}"
    r"|\b[A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY)[A-Za-z0-9_]*\s*[:=]",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def relevance_query(prompt: str | None) -> TextQuery | None:
    """The prompt's words as an any-word full-text query, or None when it has none."""
    if not prompt:
        return None
    words: list[str] = []
    for match in _WORD.finditer(prompt[:MAX_PROMPT_CHARS]):
        word = match.group().lower()
        if word not in STOP_WORDS and word not in words:
            words.append(word)
            if len(words) == MAX_QUERY_TERMS:
                break
    if not words:
        return None
    return parse_text_query(" OR ".join(words))


def keywords_query(query: TextQuery) -> TextQuery:
    """``query``'s positive terms as ONE any-term group, stop words left out.

    A question used as a grep pattern ("which port did we move the dev server
    to?") rarely has all its words in one message, so ANDed they match
    nothing; any of its keywords matching, ranked by how many match, finds the
    answer. Quoted phrases stay phrases and ``-excluded`` terms stay excluded;
    when only stop words are left, all the terms are kept.
    """
    # A word loses the punctuation around it ("end?" is "end"), for highlights.
    terms = [
        t if t.phrase else Term(t.text.strip(string.punctuation)) for t in query.positive_terms
    ]
    terms = [t for t in terms if t.text] or list(query.positive_terms)
    kept = _unique([t for t in terms if t.phrase or t.text.lower() not in STOP_WORDS])
    kept = (kept or _unique(terms))[:MAX_QUERY_TERMS]
    excluded = tuple(_unique(list(query.excluded)))
    # Web-search syntax has no parentheses and binds AND tighter than OR, so
    # "(a OR b) AND NOT x" is written "a -x OR b -x" (Postgres reads ``raw``).
    exclusions = "".join(f" -{_quoted(t)}" for t in excluded)
    raw = " OR ".join(_quoted(t) + exclusions for t in kept)
    return TextQuery(raw, (tuple(kept),), excluded)


def _unique(terms: list[Term]) -> list[Term]:
    seen: set[tuple[str, bool]] = set()
    out = []
    for term in terms:
        key = (term.text.lower(), term.phrase)
        if key not in seen:
            seen.add(key)
            out.append(term)
    return out


def _quoted(term: Term) -> str:
    return '"' + term.text.replace('"', " ") + '"'


def recall_identifiers(prompt: str | None) -> list[str]:
    """The identifiers the prompt names, in order, secret-like ones left out (at most 4)."""
    if not prompt:
        return []
    found: list[str] = []
    for match in _IDENTIFIER.finditer(prompt[:MAX_PROMPT_CHARS]):
        name = match.group()
        if len(name) > MAX_IDENTIFIER_CHARS or ("/" in name and not _is_path(name)):
            continue
        if name not in found and not is_secret_like(name):
            found.append(name)
            if len(found) == MAX_IDENTIFIERS:
                break
    return found


def _is_path(name: str) -> bool:
    """A slashed word that is a path, not prose like ``and/or`` or ``read/write``."""
    return (
        name.startswith(("/", "./", "../", "~/"))
        or name.count("/") >= 2
        or bool(_EXTENSION.search(name))
    )


def is_secret_like(name: str) -> bool:
    """True for a name that looks like it holds a credential (never looked up)."""
    segments = set(re.split(r"[_./~-]+", name.upper()))
    if "/" in name and segments & _SECRET_PATH_SEGMENTS:
        return True
    return bool(segments & _SECRET_SEGMENTS)


def identifier_pattern(identifier: str) -> str:
    """An RE2 pattern finding ``identifier`` as a whole name (case-sensitive)."""
    return f"(?:^|[^A-Za-z0-9_]){re.escape(identifier)}(?:$|[^A-Za-z0-9_])"


def names(text: str, identifier: str) -> bool:
    """True when ``text`` holds ``identifier`` as a whole name."""
    return re.search(identifier_pattern(identifier), text) is not None


def recall_sentence(content: str, identifier: str) -> str | None:
    """The sentence of ``content`` naming ``identifier``, on one line and clipped.

    None when it does not name it, or when the sentence carries a
    secret-like name or value.
    """
    match = re.search(identifier_pattern(identifier), content)
    if match is None:
        return None
    at = content.index(identifier, match.start())
    line_start = content.rfind("\n", 0, at) + 1
    line_end = content.find("\n", at)
    line = content[line_start : len(content) if line_end < 0 else line_end]
    at -= line_start
    start = 0
    for end in _SENTENCE_END.finditer(line, 0, at):
        start = end.end()
    after = _SENTENCE_END.search(line, at + len(identifier))
    sentence = line[start : after.end() if after else len(line)]
    if len(sentence) > MAX_SNIPPET_CHARS:
        # A third of the room before the name, as grep's snippets do.
        at = sentence.index(identifier)
        begin = max(0, min(at - MAX_SNIPPET_CHARS // 3, len(sentence) - MAX_SNIPPET_CHARS))
        clipped = sentence[begin : begin + MAX_SNIPPET_CHARS]
        sentence = (
            ("…" if begin else "") + clipped + ("…" if begin + len(clipped) < len(sentence) else "")
        )
    sentence = " ".join(sentence.split())
    if not sentence or _SECRET_VALUE.search(sentence) or _names_a_secret(sentence):
        return None
    return sentence


def _names_a_secret(sentence: str) -> bool:
    return any(is_secret_like(m.group()) for m in re.finditer(_CONSTANT_CASE, sentence))


def meaning_sentence(content: str, prompt: str) -> str | None:
    """The passage of ``content`` a snippet recalled by meaning shows, on one line and clipped.

    The sentence sharing the most keywords with ``prompt`` (the first on a
    tie: a message's opening usually says what it is about), then the
    sentences after it while they fit :data:`MAX_SNIPPET_CHARS`. None when
    it is empty or carries a secret-like name or value.
    """
    flat = " ".join(content[:MAX_MEANING_CHARS].split())
    pieces: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(flat):
        pieces.append(flat[start : end.end()].strip())
        start = end.end()
    pieces = [p for p in [*pieces, flat[start:].strip()] if p]
    if not pieces:
        return None
    wanted = {w.lower() for w in _WORD.findall(prompt[:MAX_PROMPT_CHARS])} - STOP_WORDS
    shared = [len(wanted & {w.lower() for w in _WORD.findall(p)}) for p in pieces]
    best = max(range(len(pieces)), key=lambda i: (shared[i], -i))
    passage = pieces[best]
    for piece in pieces[best + 1 :]:
        if len(passage) + 1 + len(piece) > MAX_SNIPPET_CHARS:
            break
        passage += " " + piece
    if len(passage) > MAX_SNIPPET_CHARS:
        passage = passage[: MAX_SNIPPET_CHARS - 1].rstrip() + "…"
    if _SECRET_VALUE.search(passage) or _names_a_secret(passage):
        return None
    return passage
