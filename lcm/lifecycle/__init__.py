"""What an agent host's context-engine lifecycle needs beyond ingest and assembly.

``commits``: one accepted turn written exactly once per host advancement key.
``forks``: a subagent's conversation prepared from its parent's context, ended
or rolled back. ``recall``: the system-prompt text that tells the model its
history is summarized and how to get it back.
"""
