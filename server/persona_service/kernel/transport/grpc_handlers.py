"""grpcio's handler type as the pipeline's interceptor meets it (pipeline.RequestPipeline.intercept_service).

grpcio's `ServerInterceptor.intercept_service` is generic over a handler's request and response types; the
pipeline's cannot be: it wraps every method's handler (each over its own messages) in one that decodes tolerantly
and, for a stream, sends bytes. A handler over any messages is the only annotation its override accepts, so that
`Any` lives here, let off (pyproject.toml), and the pipeline itself is held to none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import grpc

# A string: grpcio's RpcMethodHandler is generic in its stubs only.
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
