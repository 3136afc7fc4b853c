"""Moving a conversation out and back in: JSONL export and import (``service``)."""
