"""What a prompt asks about: relevance terms, identifiers to recall, secret-like names."""

from __future__ import annotations

from lcm.retrieval.prompt_terms import (
    is_secret_like,
    keywords_query,
    recall_identifiers,
    recall_sentence,
    relevance_query,
)
from lcm.retrieval.query import Term, fts5_expression, parse_text_query


def test_relevance_terms_skip_stop_words_and_punctuation() -> None:
    query = relevance_query("Which port does the kestrel relay listen on?")
    assert query is not None
    assert [t.text for t in query.positive_terms] == ["port", "kestrel", "relay", "listen"]
    assert len(query.groups) == 1  # any word matches
    assert relevance_query("What was it, and why?") is None
    assert relevance_query("?! ...") is None
    assert relevance_query(None) is None


def test_keywords_of_a_pattern_are_one_any_term_group() -> None:
    query = keywords_query(
        parse_text_query("Which port did we move the dev server to, in the end?")
    )
    assert [t.text for t in query.positive_terms] == ["port", "move", "dev", "server", "end"]
    assert len(query.groups) == 1
    assert query.excluded == ()
    kept = keywords_query(parse_text_query('which port is the "dev server" on -staging'))
    assert kept.groups == ((Term("port"), Term("dev server", phrase=True)),)
    assert kept.excluded == (Term("staging"),)
    assert fts5_expression(kept) == '(("port" OR "dev server")) NOT "staging"'
    # Postgres reads raw as web-search syntax, where AND binds tighter than OR.
    assert kept.raw == '"port" -"staging" OR "dev server" -"staging"'
    assert [t.text for t in keywords_query(parse_text_query("what is it?")).positive_terms] == [
        "what",
        "is",
        "it",
    ]


def test_identifiers_constant_case_paths_tickets_secret_like_left_out() -> None:
    prompt = (
        "Set ORBIT_RELAY_PORT like AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN and DB_PASSWORD? "
        "See deploy/nginx/site.conf and OPS-1234, and/or read/write, ~/.ssh/id_rsa, "
        "./app/.env, NODE_ENV, https://example.com/a/b.html"
    )
    assert recall_identifiers(prompt) == [
        "ORBIT_RELAY_PORT",
        "deploy/nginx/site.conf",
        "OPS-1234",
        "NODE_ENV",
    ]
    for name in ("AWS_SECRET_ACCESS_KEY", "SLACK_BOT_TOKEN", "DB_PASSWORD", "API_KEY"):
        assert is_secret_like(name)
    assert not is_secret_like("ORBIT_RELAY_PORT")
    assert recall_identifiers("/srv/" + "a" * 300 + ".log and OPS-9") == ["OPS-9"]


def test_the_sentence_naming_it_without_secrets() -> None:
    content = "Intro.\nAs agreed, we set ORBIT_RELAY_PORT to 7443 for the relay. Then lunch.\n"
    assert (
        recall_sentence(content, "ORBIT_RELAY_PORT")
        == "As agreed, we set ORBIT_RELAY_PORT to 7443 for the relay."
    )
    assert recall_sentence("XORBIT_RELAY_PORT", "ORBIT_RELAY_PORT") is None
    assert recall_sentence("ORBIT_RELAY_PORT=1 and GITHUB_TOKEN=abc", "ORBIT_RELAY_PORT") is None
    assert (
        recall_sentence("ORBIT_RELAY_PORT uses key AKIAABCDEFGHIJKLMNOP", "ORBIT_RELAY_PORT")
        is None
    )
    long = recall_sentence("a" * 1000 + " ORBIT_RELAY_PORT " + "b" * 1000, "ORBIT_RELAY_PORT")
    assert long is not None
    assert len(long) <= 402
    assert "ORBIT_RELAY_PORT" in long


def test_a_meaning_snippet_is_the_sentence_sharing_the_prompt_words() -> None:
    from lcm.retrieval.prompt_terms import meaning_sentence

    content = (
        "Sure.\nThe nightly backup runs at 02:00 from the storage host. "
        "It keeps fourteen copies.\n\nAnything else?"
    )
    assert (
        meaning_sentence(content, "when does the backup run each night?")
        == "The nightly backup runs at 02:00 from the storage host. It keeps fourteen copies. "
        "Anything else?"
    )
    # No shared word: the opening.
    assert meaning_sentence("First point. Second point.", "zebra") == ("First point. Second point.")
    assert meaning_sentence("   ", "anything") is None
    # Secret-like content is never shown.
    assert meaning_sentence("The GITHUB_TOKEN= ghp_abcdefghijklmnop is set.", "token") is None
    long = "word " * 200
    clipped = meaning_sentence(long, "word")
    assert clipped is not None
    assert len(clipped) <= 400
    assert clipped.endswith("…")
