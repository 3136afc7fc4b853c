"""``python -m bench``: every scenario's options live on one parser, so they must not clash."""

from __future__ import annotations

import pytest

from bench.__main__ import main


def test_the_bench_parser_builds_with_every_scenarios_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--plans", "--scale", "--tables", "--embedded", "--seconds"):
        assert option in shown
