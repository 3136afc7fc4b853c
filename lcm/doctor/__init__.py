"""The doctor: broken, truncated and degraded summaries, listed and repaired in place."""
