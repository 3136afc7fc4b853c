"""Model list prices, for the estimated cost in ``/v1/tenant/usage``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ModelPrice(BaseModel):
    """List price of one model, US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


# Anthropic list prices when this was written; ``LCM_MODEL_PRICES`` (JSON)
# replaces the table. A dated model id (``claude-haiku-4-5-20251001``) is
# priced by its longest listed prefix.
DEFAULT_MODEL_PRICES = {
    "claude-haiku-4-5": ModelPrice(input_per_mtok=1.0, output_per_mtok=5.0),
    "claude-sonnet-4-5": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0),
    "claude-sonnet-4": ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0),
    "claude-opus-4-5": ModelPrice(input_per_mtok=5.0, output_per_mtok=25.0),
    "claude-opus-4-1": ModelPrice(input_per_mtok=15.0, output_per_mtok=75.0),
    "claude-3-5-haiku": ModelPrice(input_per_mtok=0.8, output_per_mtok=4.0),
}
