"""The client's version: sent as ``User-Agent: lcm-client/<version>``, read by its pyproject."""

__version__ = "0.1.0"
