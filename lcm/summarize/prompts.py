"""Depth-aware summary prompts, in LCM's own words.

A summary at each depth serves a different reader need: a leaf must let the
agent pick up the exact thread it was on; higher levels trade detail for the
shape of the work and, at the top, for what stays true. The prompt therefore
changes with depth, while the rules that protect losslessness (keep
identifiers verbatim, invent nothing, end with the expansion footer) do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from lcm.policy.markup import escape_markup
from lcm.summarize.footer import FOOTER_PREFIX
from lcm.summarize.provider import SummaryRequest

_ROLE = (
    "You write summaries for Lossless Context Management (LCM). An AI agent's "
    "conversation history is being compacted: the source you receive will be replaced in "
    "the agent's working context by your summary. The original text stays stored and the "
    "agent can expand it on demand, so your job is not to keep everything but to let the "
    "agent carry on from your summary alone and know what it could look up."
)

_RULES = (
    "Rules:\n"
    "- Write plain text. No preamble such as 'Here is a summary'.\n"
    "- Never invent facts, motives or outcomes that the source does not state.\n"
    "- Copy identifiers exactly: file paths, commands, function and table names, URLs, "
    "numbers, versions, error messages.\n"
    "- Prefer concrete statements over vague ones ('switched the queue to Redis' rather "
    "than 'made infrastructure changes').\n"
    f"- End with exactly one last line that starts with '{FOOTER_PREFIX}' followed by "
    "three to eight short, comma-separated topics that the source covers in more detail "
    "than your summary does."
)

_LEAF = (
    "The source is a span of raw conversation messages, each prefixed with its timestamp. "
    "Tell what happened in this span, in order: what was asked and by whom, what was done, "
    "each decision and the reason given for it, files that were created, read, edited or "
    "deleted (with their paths), commands that were run and what they returned, every error "
    "met and how it was fixed or that it is still unfixed, and the questions left open at "
    "the end. Keep the timestamps of turning points."
)

_SESSION = (
    "The source is a run of leaf summaries from one working session. Merge them into a "
    "single chronological account of the session: the threads of work in the order they "
    "happened, with time markers, the decisions taken and what came of them. Drop steps "
    "that later steps made irrelevant; keep anything a later step depends on."
)

_ARC = (
    "The source is a run of session summaries. Describe the arc they form rather than "
    "retelling each session: the goals that were pursued, what was achieved, what was "
    "abandoned and why, and what carries forward (the current state of the work, "
    "commitments made, problems still unsolved). Cause and effect matter more than dates."
)

_DURABLE = (
    "The source is a run of high-level summaries covering a long stretch of work. Keep only "
    "what stays true and useful over time: durable decisions and their reasons, constraints "
    "and conventions in force, lessons learned the hard way, and lasting facts about the "
    "people, systems and environment involved. Leave out transient detail entirely."
)

_AGGRESSIVE = (
    "A previous attempt at this summary came out too long. This time keep only durable "
    "facts: decisions, constraints, identifiers and paths, outcomes, unresolved problems. "
    "No narrative and no connecting prose; short lines are fine. Staying under the token "
    "limit matters more than completeness here: the originals can always be expanded."
)

_CONTINUITY = (
    "The <previous_context> block is the summary that comes just before this source. Use it "
    "only to resolve references and keep the story continuous. Do not repeat it and do not "
    "summarize it again: summarize the <source> block only."
)

# The tags the user message wraps text in: the text may not spell them
# (a message quoting ``</source>`` would end the source early).
_PROMPT_TAGS = ("source", "previous_context")

# Room for the footer line and for the model's tokens being counted a little
# differently from our estimate, so a summary near its target is not cut mid-sentence.
_OUTPUT_ALLOWANCE_TOKENS = 64


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt: the system text and the single user message."""

    system: str
    user: str
    max_output_tokens: int


def depth_instructions(depth: int) -> str:
    """What a summary at ``depth`` is for (0 = leaf, 1 = session, 2 = arc, 3+ = durable)."""
    if depth == 0:
        return _LEAF
    if depth == 1:
        return _SESSION
    if depth == 2:
        return _ARC
    return _DURABLE


def max_output_tokens(target_tokens: int) -> int:
    """The API ``max_tokens`` for a summary aiming at ``target_tokens``."""
    return target_tokens + target_tokens // 2 + _OUTPUT_ALLOWANCE_TOKENS


def build_prompt(request: SummaryRequest) -> Prompt:
    """Render ``request`` into a system prompt and one user message."""
    system_parts = [_ROLE, depth_instructions(request.depth), _RULES]
    if request.aggressive:
        system_parts.append(_AGGRESSIVE)
    if request.previous_context:
        system_parts.append(_CONTINUITY)
    if request.custom_instructions.strip():
        system_parts.append(
            "Additional instructions from the operator of this deployment (follow them "
            "unless they contradict the rules above):\n" + request.custom_instructions.strip()
        )

    user_parts = []
    if request.previous_context:
        user_parts.append(
            "<previous_context>\n"
            f"{escape_markup(request.previous_context.strip(), _PROMPT_TAGS)}\n"
            "</previous_context>"
        )
    user_parts.append(
        f'<source kind="{request.kind}" depth="{request.depth}">\n'
        f"{escape_markup(request.source_text.strip(), _PROMPT_TAGS)}\n</source>"
    )
    user_parts.append(
        f"Write the {'durable-facts ' if request.aggressive else ''}summary of the source now, "
        f"in at most about {request.target_tokens} tokens, ending with the "
        f"'{FOOTER_PREFIX}' line."
    )
    return Prompt(
        system="\n\n".join(system_parts),
        user="\n\n".join(user_parts),
        max_output_tokens=max_output_tokens(request.target_tokens),
    )
