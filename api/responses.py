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


def model_response_with_json(body: BaseModel, field: str, encoded: bytes) -> Response:
    """:func:`model_response` with ``field`` sent as the JSON ``encoded`` already holds.

    ``body`` carries ``field`` as an empty list and no field before it may
    hold a string (ids and counts only), so the first ``"field":[]`` is that
    field's. An assembled context's messages are encoded once and served
    while their conversation is unchanged (``AssembledContext.messages_json``).
    """
    dumped = body.__pydantic_serializer__.to_json(body)
    head, found, tail = dumped.partition(b'"' + field.encode() + b'":[]')
    if not found:
        raise ValueError(f"{type(body).__name__}.{field} is not an empty list")
    return Response(
        b"".join((head, b'"', field.encode(), b'":', encoded, tail)), media_type="application/json"
    )
