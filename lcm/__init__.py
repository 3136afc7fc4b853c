"""Lossless Context Management: the domain (no HTTP, no task queue)."""

__version__ = "0.1.0"
