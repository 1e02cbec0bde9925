"""The registry: every domain module, one line each. The server, the jobs,
the CLI, id prefixes, event types, config keys, endpoint caps and
migrations are assembled from this list (see kernel.module)."""

from persona_service.admin.module import MODULE as ADMIN
from persona_service.billing.module import MODULE as BILLING
from persona_service.chat.module import MODULE as CHAT
from persona_service.config.module import MODULE as CONFIG
from persona_service.dashboard.module import MODULE as DASHBOARD
from persona_service.docs.module import MODULE as DOCS
from persona_service.events.module import MODULE as EVENTS
from persona_service.files.module import MODULE as FILES
from persona_service.kernel.module import Modules
from persona_service.marketplace.module import MODULE as MARKETPLACE
from persona_service.moderation.module import MODULE as MODERATION
from persona_service.orgs.module import MODULE as ORGS
from persona_service.personas.module import MODULE as PERSONAS
from persona_service.portraits.module import MODULE as PORTRAITS
from persona_service.privacy.module import MODULE as PRIVACY
from persona_service.probes.module import MODULE as PROBES
from persona_service.scim.module import MODULE as SCIM
from persona_service.webhooks.module import MODULE as WEBHOOKS

MODULES = Modules([
    ORGS,
    PERSONAS,
    MODERATION,
    CHAT,
    FILES,
    PORTRAITS,
    BILLING,
    MARKETPLACE,
    PRIVACY,
    SCIM,
    PROBES,
    DOCS,
    DASHBOARD,
    WEBHOOKS,
    CONFIG,
    EVENTS,
    ADMIN,
])
