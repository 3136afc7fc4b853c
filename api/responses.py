"""Responses serialized straight from a model the route built itself."""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel


def model_response(body: BaseModel) -> Response:
    """``body`` as the JSON response FastAPI would send for it, without revalidating it.

    A route returning a model instance has it validated again against its
    ``response_model`` (in the thread pool) before it is serialized; for a
    body built from the domain's own typed values (an assembled context is
    a thousand message dicts) that is pure cost. The route still declares
    ``response_model``, so the OpenAPI document is unchanged.
    """
    return Response(body.model_dump_json(), media_type="application/json")
