"""Agent tools over the stored history: grep, describe, expand and expand-query.

Summaries are lossy by design; these tools are how an agent finds and
recovers the originals. Every read is bounded by the tenant, and inside an
expand-query loop also by the conversations and the token budget of a grant.
"""
