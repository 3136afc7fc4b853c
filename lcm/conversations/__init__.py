"""Conversations and session families."""
