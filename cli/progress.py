"""Progress bars for long-running commands, on a terminal only.

A bar is drawn on stderr when stderr is a terminal and the command was not
asked for ``--json``; otherwise nothing is drawn and the command's output is
what it always was, so scripts see no change. The domain reports progress
through a plain callback (:data:`lcm.progress.OnProgress`); this module is
where that callback meets ``rich``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from cli.common import console
from lcm.progress import OnProgress


def bars_wanted(quiet: bool = False) -> bool:
    """Draw bars: stderr is a terminal and the command was not told to be ``quiet``
    (``--json`` output for a script, or results printed on the same terminal)."""
    return not quiet and console.is_terminal


def new_progress(*columns: ProgressColumn | str, quiet: bool = False) -> Progress:
    """A ``rich`` progress display on stderr, disabled (drawing nothing) unless wanted."""
    shown = columns or (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # Never redirect stdout through the display: results (an export's lines)
    # must reach stdout untouched while a bar is drawn on stderr.
    return Progress(
        *shown,
        console=console,
        disable=not bars_wanted(quiet),
        redirect_stdout=False,
        redirect_stderr=False,
    )


@contextmanager
def progress_bar(description: str, *, quiet: bool = False) -> Iterator[OnProgress]:
    """One bar for the block; the callback it yields takes ``(done, total)``."""
    with new_progress(quiet=quiet) as progress:
        task = progress.add_task(description, total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield report
