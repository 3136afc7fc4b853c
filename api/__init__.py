"""The HTTP entrypoint: parse, authenticate, call the domain, map errors."""
