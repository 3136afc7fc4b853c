"""The operator's entrypoint: the ``lcm`` command."""
