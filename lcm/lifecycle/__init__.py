"""What an agent host's context-engine lifecycle needs beyond ingest and assembly.

``commits``: one accepted turn written exactly once per host advancement key.
``forks``: a subagent's conversation prepared from its parent's context, ended
or rolled back. ``recall``: the system-prompt text that tells the model its
history is summarized and how to get it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.lifecycle.commits import commit_turn
    from lcm.lifecycle.forks import end_fork, prepare_fork
    from lcm.lifecycle.gateway import TurnInput, commit_host_turn, take_turn
    from lcm.lifecycle.recall import recall_prompt

__all__ = [
    "TurnInput",
    "commit_host_turn",
    "commit_turn",
    "end_fork",
    "prepare_fork",
    "recall_prompt",
    "take_turn",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.lifecycle.commits": ("commit_turn",),
        "lcm.lifecycle.forks": ("end_fork", "prepare_fork"),
        "lcm.lifecycle.gateway": ("TurnInput", "commit_host_turn", "take_turn"),
        "lcm.lifecycle.recall": ("recall_prompt",),
    },
)
