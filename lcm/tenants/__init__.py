"""Tenants, API keys and per-tenant settings."""
