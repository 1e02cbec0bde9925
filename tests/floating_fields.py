"""Every double/float field of every RPC's request (nested persona messages included), read from the protos'
descriptors, and a request holding a number there: so a double added to a request is covered by the tests of
non-finite numbers (tests/kernel/test_validation.py, test_grpc_native.py) without a test of its own."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass

import persona.v1
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

FLOATING = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}
WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue"}


@dataclass(frozen=True)
class Floating:
    method: MethodDescriptor
    fields: tuple[FieldDescriptor, ...]  # from the request down to the double/float field

    @property
    def rpc(self) -> str:
        return f"/{self.method.containing_service.full_name}/{self.method.name}"

    @property
    def path(self) -> str:
        """The JSON path validation names (a repeated field's first item)."""
        return ".".join(f.json_name + ("[0]" if f.is_repeated else "") for f in self.fields)

    def request(self, number: float) -> Message:
        """The RPC's request with only `number` at the field (and the messages above it)."""
        request = message_factory.GetMessageClass(self.method.input_type)()
        at = request
        for field in self.fields[:-1]:
            at = getattr(at, field.name).add() if field.is_repeated else getattr(at, field.name)
            at.SetInParent()
        last = self.fields[-1]
        if last.is_repeated:
            getattr(at, last.name).append(number)
        else:
            setattr(at, last.name, number)
        return request


def floating_fields() -> list[Floating]:
    found = []
    for module in pkgutil.iter_modules(persona.v1.__path__):
        if not module.name.endswith("_pb2"):
            continue
        for service in importlib.import_module(f"persona.v1.{module.name}").DESCRIPTOR.services_by_name.values():
            found += [Floating(method, fields) for method in service.methods
                      for fields in _floating(method.input_type, (), frozenset())]
    return found


def _floating(message: Descriptor, above: tuple[FieldDescriptor, ...], seen: frozenset[str]) -> Iterator[
        tuple[FieldDescriptor, ...]]:
    # A google.protobuf.Value's number is free JSON, checked apart (validation's _non_finite) and tested there.
    for field in message.fields:
        if field.type in FLOATING:
            yield (*above, field)
        elif field.message_type is not None and field.message_type.full_name in WRAPPERS:
            raise AssertionError(f"{field.full_name}: a wrapped double, which validation does not walk into")
        elif field.message_type is not None and field.message_type.full_name.startswith("persona."):
            assert not field.message_type.GetOptions().map_entry, f"{field.full_name}: a map (not walked here)"
            if field.message_type.full_name not in seen:
                yield from _floating(field.message_type, (*above, field), seen | {message.full_name})
