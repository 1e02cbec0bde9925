"""The published contract: `GET /v1/openapi.json` and the `/docs` reference page."""

from persona.v1 import docs_pb2_grpc

from persona_service.docs.servicer import DocsServicer
from persona_service.kernel.api import Module, ServiceBinding

MODULE = Module(
    name="docs",
    services=(ServiceBinding("persona.v1.DocsService", DocsServicer, docs_pb2_grpc.add_DocsServiceServicer_to_server),),
)
