"""A unary answer's initial metadata (its response headers) sent with the
answer itself, not before it.

grpcio's sync server sends `context.send_initial_metadata()` as a batch of
its own: one more write from the server and one more wake-up of Envoy for
every call. When none was sent, grpcio adds an empty initial-metadata
operation to the final batch (message and status); `attach` makes that
operation carry ours. This reaches into grpcio's private `_server` module
(grpcio is pinned in pyproject.toml): if the hook is missing, `attach`
sends the metadata the public way, so a grpcio upgrade can cost speed,
never correctness.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import grpc
import grpc._server as _grpc_server

if TYPE_CHECKING:
    from grpc._typing import MetadataType

_STASH = "_persona_initial_metadata"
# grpcio's private call state (_RPCState) and its initial metadata, typed as its own module declares them.
_original: Callable[[_grpc_server._RPCState, MetadataType | None], MetadataType | None] | None = getattr(
    _grpc_server, "_get_initial_metadata", None)


def _with_stash(state: _grpc_server._RPCState, metadata: MetadataType | None) -> MetadataType | None:
    if metadata is None:
        metadata = getattr(state, _STASH, None)
    assert _original is not None
    return _original(state, metadata)


HOOKED = callable(_original)
if HOOKED:
    _grpc_server._get_initial_metadata = _with_stash


def attach(context: grpc.ServicerContext, metadata: Sequence[tuple[str, str]]) -> None:
    """Send `metadata` as the call's initial metadata, in the answer's batch."""
    state = getattr(context, "_state", None)
    if HOOKED and state is not None and getattr(state, "initial_metadata_allowed", False):
        setattr(state, _STASH, tuple(metadata))
    else:
        context.send_initial_metadata(tuple(metadata))
