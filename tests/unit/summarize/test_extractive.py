"""The offline extractive provider: deterministic, compressing, keeping the facts that matter."""

from __future__ import annotations

from lcm.summarize.extractive import EXTRACTIVE_MODEL, ExtractiveProvider
from lcm.summarize.footer import has_footer
from lcm.summarize.provider import SummaryRequest
from lcm.tokens import estimate_tokens

CHATTER = [
    "user: thanks, that sounds good to me",
    "assistant: sure thing, happy to help with that",
    "user: ok let me think about it for a moment",
]
FACTS = [
    "assistant: The import failed with error E1021 in lcm/ingest/bootstrap.py at line 214.",
    "user: We decided to cap imports at 5000 messages per request.",
    "assistant: I fixed the anchor lookup; see https://example.com/issues/77 for the report.",
    "user: Who owns the retention policy, Maria Gomez?",
]


def transcript(repeats: int = 10) -> str:
    lines = []
    for i in range(repeats):
        for j, text in enumerate(CHATTER + FACTS if i == 3 else CHATTER):
            lines.append(f"[2026-11-{10 + i:02d}T09:{j:02d}:00Z] {text}")
    return "\n".join(lines)


def summarize(source: str, target: int = 300, aggressive: bool = False) -> str:
    request = SummaryRequest(
        source_text=source, depth=0, target_tokens=target, aggressive=aggressive
    )
    return ExtractiveProvider().complete(request).text


def test_same_input_same_output() -> None:
    source = transcript()
    assert summarize(source) == summarize(source)


def test_compresses_long_input_within_budget() -> None:
    source = transcript(40)
    completion = ExtractiveProvider().complete(
        SummaryRequest(source_text=source, depth=0, target_tokens=400)
    )
    assert completion.model == EXTRACTIVE_MODEL
    assert completion.output_tokens == estimate_tokens(completion.text) <= 400
    assert completion.output_tokens < estimate_tokens(source) // 4
    assert completion.input_tokens == estimate_tokens(source)


def test_never_uses_more_than_half_the_input() -> None:
    source = transcript(3)
    text = summarize(source, target=5_000)
    assert estimate_tokens(text) <= estimate_tokens(source) // 2


def test_keeps_paths_numbers_urls_names_timestamps_and_decisions() -> None:
    text = summarize(transcript(), target=300)
    for fact in (
        "lcm/ingest/bootstrap.py",
        "E1021",
        "5000",
        "https://example.com/issues/77",
        "Maria Gomez",
        "2026-11-13T09:",
        "decided to cap imports",
    ):
        assert fact in text, fact
    assert "happy to help" not in text
    assert has_footer(text)


def test_aggressive_keeps_only_durable_sentences() -> None:
    text = summarize(transcript(), target=200, aggressive=True)
    assert "decided to cap imports" in text
    assert "sure thing" not in text
    assert "thanks, that sounds good" not in text


def test_header_names_the_time_span() -> None:
    first_line = summarize(transcript()).splitlines()[0]
    assert "2026-11-10T09:00:00Z" in first_line
    assert "2026-11-19T09:02:00Z" in first_line


def test_repeated_sentences_are_kept_once() -> None:
    line = "[2026-11-20T10:00:00Z] tool: error: connection refused to db.internal:5432"
    source = "\n".join([line] * 30 + ["[2026-11-20T10:30:00Z] user: We will retry tomorrow."])
    assert summarize(source, target=200).count("connection refused") == 1


def test_cjk_source_is_handled() -> None:
    source = "\n".join(
        f"[2026-11-20T10:{i:02d}:00Z] user: 我们决定把队列迁移到Redis。"
        f"错误出现在 workers/app.py 第{i}行。今天的会议很长。大家讨论了很多细节。"
        for i in range(40)
    )
    completion = ExtractiveProvider().complete(
        SummaryRequest(source_text=source, depth=0, target_tokens=300)
    )
    assert completion.output_tokens <= 300
    assert completion.output_tokens < estimate_tokens(source) // 3
    assert "workers/app.py" in completion.text
    assert "错误" in completion.text
    assert has_footer(completion.text)


def test_condensed_input_skips_child_footers_but_keeps_their_topics() -> None:
    children = "\n\n".join(
        f"Session {n}: we decided to shard table events_{n} by tenant.\n"
        f"Expand for details about: events_{n} sharding, tenant keys"
        for n in range(20)
    )
    text = summarize(children, target=200)
    body = text.splitlines()[1:-1]
    assert not any(line.lstrip("- ").startswith("Expand for details") for line in body)
    assert "events_0 sharding" in text.splitlines()[-1]
