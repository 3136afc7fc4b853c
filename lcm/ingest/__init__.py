"""The write path: validate what a gateway sends and store it, exactly once."""
