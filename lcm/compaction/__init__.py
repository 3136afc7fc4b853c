"""Compaction: deciding what to summarize (pure planning) and doing it."""
