"""Files: the object storage port (local files or S3-compatible) and the
service that answers the local backend's signed URLs."""

from persona.v1 import files_pb2_grpc

from persona_service.files.servicer import FileServicer
from persona_service.files.settings import FileSettings
from persona_service.files.storage import PUBLIC_URL, STORAGE
from persona_service.kernel.api import Module, ServiceBinding

MODULE = Module(
    name="files",
    services=(ServiceBinding("persona.v1.FileService", FileServicer, files_pb2_grpc.add_FileServiceServicer_to_server),),
    settings=FileSettings,
    resources=(STORAGE, PUBLIC_URL),
)
