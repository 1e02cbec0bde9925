"""What other modules may use of `orgs` (its public surface): read-only
lookups of organizations and members, SCIM tokens (API keys of their own
purpose). Everything else in this folder is private to it."""

from persona_service.orgs.directory import OrgDirectory
from persona_service.orgs.keys import ScimTokens
from persona_service.orgs.members import OWNER, MemberDirectory
from persona_service.orgs.records import ApiKeyRecord

__all__ = ["OWNER", "ApiKeyRecord", "MemberDirectory", "OrgDirectory", "ScimTokens"]
