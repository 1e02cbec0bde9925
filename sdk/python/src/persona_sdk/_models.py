"""The base of every answer model, and how request values go on the wire.

Answers are pydantic models with snake_case attributes (aliased to the API's
camelCase JSON): `persona.display_name`. Fields a newer server adds are kept
(`extra="allow"`), so an old client never breaks on them; an answer that does
not validate at all (a value outside a closed set the client does not know
yet) is still returned, built without validation, rather than raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic

M = TypeVar("M", bound="BaseModel")


class BaseModel(pydantic.BaseModel):
    """An API object. `to_dict()` gives its JSON (the API's member names)."""

    model_config = pydantic.ConfigDict(populate_by_name=True, extra="allow", protected_namespaces=())

    def to_dict(self) -> dict[str, Any]:
        """The object as the API's JSON: camelCase members, unset ones left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def parse(cls: type[M], data: Any) -> M:
    """`data` (an answer's JSON) as `cls`; tolerant of values this client does not know."""
    try:
        return cls.model_validate(data)
    except pydantic.ValidationError:
        if not isinstance(data, Mapping):
            raise
        return cls.model_construct(**data)


def to_wire(value: Any, fields: Mapping[str, Mapping[str, tuple[str, str | None]]], schema: str | None) -> Any:
    """A request value as JSON: a model by its aliases; a params dict (snake_case keys, or the API's
    own names) by the generated table `fields` of its schema, recursively; anything else as is."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, (list, tuple)):
        return [to_wire(item, fields, schema) for item in value]
    if isinstance(value, Mapping) and schema is not None and schema in fields:
        names = fields[schema]
        out: dict[str, Any] = {}
        for key, item in value.items():
            wire, nested = names.get(key, (key, None))
            out[wire] = to_wire(item, fields, nested)
        return out
    return value
