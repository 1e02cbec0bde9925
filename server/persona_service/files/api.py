"""What other modules may use of `files` (its public surface): the object
storage port. Everything else in this folder is private to it."""

from persona_service.files.records import ObjectNotFound, SignedUrl
from persona_service.files.settings import FileSettings
from persona_service.files.storage import (
    Storage,
    object_key,
    public_url,
    storage_for,
)
from persona_service.kernel.api import HasResources  # what storage_for and public_url take

__all__ = ["FileSettings", "HasResources", "ObjectNotFound", "SignedUrl", "Storage", "object_key", "public_url",
           "storage_for"]
