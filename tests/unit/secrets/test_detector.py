"""The detector over the benchmark corpus: each kind found whole, look-alikes left alone."""

from __future__ import annotations

import pytest

from bench.secrets import score
from bench.secrets_corpus import Sample, build_corpus
from lcm.secrets.detector import detect

CORPUS = build_corpus(copies=2)
SECRET_KINDS = sorted({s.kind for s in CORPUS if s.secrets})
LOOKALIKE_KINDS = sorted({s.kind for s in CORPUS if not s.secrets})


def _samples(kind: str) -> list[Sample]:
    return [s for s in CORPUS if s.kind == kind]


@pytest.mark.parametrize("kind", SECRET_KINDS)
def test_each_planted_secret_is_found_whole(kind: str) -> None:
    for sample in _samples(kind):
        findings = detect(sample.text)
        for value in sample.secrets:
            at = sample.text.index(value)
            covering = [f for f in findings if f.start <= at and at + len(value) <= f.end]
            assert covering, (kind, value[:16], [(f.kind, f.start, f.end) for f in findings])


@pytest.mark.parametrize("kind", LOOKALIKE_KINDS)
def test_lookalikes_are_not_flagged(kind: str) -> None:
    for sample in _samples(kind):
        found = [(f.kind, sample.text[f.start : f.end]) for f in detect(sample.text)]
        assert found == [], sample.text[:200]


def test_the_corpus_scores_full_recall_and_no_false_positive() -> None:
    recall, false, strays = score(CORPUS)
    assert all(found == planted for found, planted in recall.values()), recall
    assert all(flagged == 0 for flagged, _ in false.values()), false
    assert strays == 0


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("export GITHUB_TOKEN=ghp_" + "aB3" * 12, "ghp_" + "aB3" * 12, "github_token"),
        ("psql postgres://app:Tr0ub4dor@db:5432/app", "Tr0ub4dor", "password_in_url"),
        ("redis://:Tr0ub4dor@cache:6379/0", "Tr0ub4dor", "password_in_url"),
        ("AWS_ACCESS_KEY_ID=AKIA" + "Q7" * 8, "AKIA" + "Q7" * 8, "aws_key"),
        ("PGPASSWORD=hunter22 psql -h db", "hunter22", "credential"),
        # Short values with no long token: past the gate through the keyword hints.
        ('DB_PASSWORD="p@ss w0rd!"', "p@ss w0rd!", "credential"),
        ("curl -H 'Authorization: Basic dXNlcjpw'", "dXNlcjpw", "bearer_token"),
    ],
)
def test_the_value_is_the_span_not_its_surroundings(text: str, value: str, kind: str) -> None:
    (finding,) = detect(text)
    assert (text[finding.start : finding.end], finding.kind) == (value, kind)


def test_offsets_count_code_points() -> None:
    key = "sk-ant-api03-" + "Zx9_" * 23 + "AA"
    text = "déjà vu 🙂 日本語: " + key + " 🙂"
    (finding,) = detect(text)
    assert text[finding.start : finding.end] == key
    assert finding.start == len("déjà vu 🙂 日本語: ")  # code points, not UTF-8 or UTF-16 units


def test_a_pem_block_is_found_whole_and_a_truncated_one_to_its_last_key_line() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAbCd==\n-----END RSA PRIVATE KEY-----"
    text = "$ cat id_rsa\n" + block + "\n$ ls"
    (finding,) = detect(text)
    assert text[finding.start : finding.end] == block
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\nAAAABG5vbmU=\n\n$ ls"
    (finding,) = detect(cut)
    assert finding.kind == "private_key"
    assert cut[finding.start : finding.end] == cut[: cut.index("\n\n")]


def test_findings_never_overlap_and_a_specific_kind_wins() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX29mX3RoZV90b2tlbl9oZXJl"
    text = f'curl -H "Authorization: Bearer {jwt}" https://api.example.com'
    findings = detect(text)
    assert [(f.kind, text[f.start : f.end]) for f in findings] == [("jwt", jwt)]


def test_short_and_plain_texts_have_no_findings() -> None:
    assert detect("") == []
    assert detect("ok") == []
    assert detect("The password is in the vault; ask for the token.") == []


def test_random_values_of_identifier_names_are_not_flagged() -> None:
    value = "q8Xv2LmN9pRt4Wz7KbYc1HdFgJs6Ae3U"
    for name in ("sessionId", "request_id", "traceIds", "commit", "etag", "image_data"):
        assert detect(f'{{"{name}": "{value}"}}') == [], name
    (finding,) = detect(f'{{"signing_salt": "{value}"}}')
    assert finding.kind == "high_entropy"
