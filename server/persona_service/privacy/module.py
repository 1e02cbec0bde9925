"""Privacy: users' exports of their own data (DSAR), built from what every
module declares it holds about a user (Module.personal_data)."""

import pathlib

from persona.v1 import privacy_pb2_grpc

from persona_service.files.api import storage_for
from persona_service.kernel.api import Job, Module, Need, Runtime, ServiceBinding, load
from persona_service.privacy.repository import PrivacyRepository
from persona_service.privacy.service import PrivacyService, erase_exports
from persona_service.privacy.servicer import PrivacyServicer
from persona_service.privacy.settings import PrivacySettings


def build_pending(runtime: Runtime) -> int:
    """Every pending export, each in a transaction of its own (the operators'
    build-one RPC builds one in its unit of work)."""
    settings = load(PrivacySettings)
    if not settings.dsar_exports:
        return 0
    built = 0
    while True:
        with runtime.work() as work:
            if PrivacyService(work).build(storage_for(runtime), runtime.modules.personal_data,
                                          settings.dsar_download_ttl_seconds) is None:
                return built
        built += 1


MODULE = Module(
    name="privacy",
    migrations=pathlib.Path(__file__).with_name("migrations"),
    services=(ServiceBinding("persona.v1.PrivacyService", PrivacyServicer,
                             privacy_pb2_grpc.add_PrivacyServiceServicer_to_server),),
    id_prefixes={"privacy_export": "dsr"},
    # Exports build from every module's part (the job); the erasure runs every module's, after their locks.
    needs=frozenset({Need.PERSONAL_DATA, Need.ERASERS, Need.ERASURE_LOCKS}),
    jobs=(Job("privacy.build_exports", 30, build_pending),),
    settings=PrivacySettings,
    personal_data=lambda work, subject: work.of(PrivacyRepository).personal_data(subject.org_id, subject.user_id),
    erase_personal_data=erase_exports,  # (with the exports' files, in PrivacyService.erase)
)
