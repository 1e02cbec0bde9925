"""The SCIM schemas this service serves (RFC 7643 §7), and what the rest of
the module reads from them: each attribute's type, plurality, case rule,
mutability and when it is returned. The schema documents themselves come
from scim2-models, so they are the RFC's, word for word. scim2-models loads
when a resource type's schemas are first read (its pydantic models cost over
a second of CPU to build, and most processes never serve SCIM)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from persona_service.scim.json_support import JSONObject, flag, objects, text

if TYPE_CHECKING:
    from scim2_models import Extension, Resource

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
ENTERPRISE_SCHEMA = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
LIST_RESPONSE = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
SEARCH_REQUEST = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
SPC_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
RESOURCE_TYPE_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
SCHEMA_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Schema"
MAX_RESULTS = 1000


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str  # string | boolean | decimal | integer | dateTime | reference | binary | complex
    multi_valued: bool = False
    case_exact: bool = False
    mutability: str = "readWrite"
    returned: str = "default"
    sub_attributes: Mapping[str, Attribute] = field(default_factory=dict)  # by lower-case name

    def sub(self, name: str) -> Attribute | None:
        return self.sub_attributes.get(name.lower())


def _given(raw: JSONObject, name: str) -> str:
    """A member every schema document of scim2-models has (an attribute's `name`, a schema's `id`)."""
    value = text(raw, name)
    if value is None:
        raise TypeError(f"scim2-models' schema has no string {name!r}: {raw}")
    return value


def _attribute(raw: JSONObject) -> Attribute:
    subs = {_given(a, "name").lower(): _attribute(a) for a in objects(raw, "subAttributes")}
    return Attribute(_given(raw, "name"), _given(raw, "type"), flag(raw, "multiValued", False),
                     flag(raw, "caseExact", False), text(raw, "mutability") or "readWrite",
                     text(raw, "returned") or "default", subs)


@dataclass(frozen=True)
class Schema:
    id: str
    document: JSONObject
    attributes: Mapping[str, Attribute]  # by lower-case name

    def attribute(self, name: str) -> Attribute | None:
        return self.attributes.get(name.lower())


def _schema(model: type[Resource[Extension]] | type[Extension]) -> Schema:
    document: JSONObject = model.to_schema().model_dump(mode="json", exclude_none=True)
    return Schema(_given(document, "id"), document,
                  {_given(a, "name").lower(): _attribute(a) for a in objects(document, "attributes")})


# The common attributes (RFC 7643 §3.1) every resource has.
COMMON = {
    "id": Attribute("id", "string", case_exact=True, mutability="readOnly", returned="always"),
    "externalid": Attribute("externalId", "string", case_exact=True),
    "meta": Attribute("meta", "complex", mutability="readOnly", sub_attributes={
        name.lower(): Attribute(name, kind, case_exact=True, mutability="readOnly")
        for name, kind in (("resourceType", "string"), ("created", "dateTime"), ("lastModified", "dateTime"),
                           ("location", "reference"), ("version", "string"))
    }),
}


@functools.cache
def _schemas_of(resource_type: str) -> tuple[Schema, ...]:
    """A resource type's core schema, then its extensions'."""
    from scim2_models import EnterpriseUser, Group, User

    models: dict[str, tuple[type[Resource[Extension]] | type[Extension], ...]] = {
        "User": (User, EnterpriseUser), "Group": (Group,),
    }
    return tuple(_schema(model) for model in models[resource_type])


@dataclass(frozen=True)
class ResourceType:
    name: str  # User | Group
    endpoint: str  # /Users
    # The attribute that names the resource (required, unique in the organization, case-insensitive).
    naming: str

    @functools.cached_property
    def core(self) -> Schema:
        return _schemas_of(self.name)[0]

    @functools.cached_property
    def extensions(self) -> tuple[Schema, ...]:
        return _schemas_of(self.name)[1:]

    def schema_for(self, uri: str | None) -> Schema | None:
        if uri is None or uri.lower() == self.core.id.lower():
            return self.core
        return next((s for s in self.extensions if s.id.lower() == uri.lower()), None)

    def attribute(self, name: str, uri: str | None = None) -> Attribute | None:
        schema = self.schema_for(uri)
        if schema is None:
            return None
        found = schema.attribute(name)
        if found is None and schema is self.core:
            found = COMMON.get(name.lower())
        return found


USERS = ResourceType("User", "/Users", "userName")
GROUPS = ResourceType("Group", "/Groups", "displayName")
RESOURCE_TYPES = {"User": USERS, "Group": GROUPS}


@functools.cache
def schemas() -> dict[str, Schema]:
    """Every schema served, by id (core and extension)."""
    return {s.id: s for rt in RESOURCE_TYPES.values() for s in (rt.core, *rt.extensions)}


def service_provider_config(base: str) -> JSONObject:
    return {
        "schemas": [SPC_SCHEMA],
        "patch": {"supported": True},
        "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": MAX_RESULTS},
        "changePassword": {"supported": False},
        "sort": {"supported": True},
        "etag": {"supported": True},
        "authenticationSchemes": [{
            "type": "oauthbearertoken", "name": "Bearer token", "primary": True,
            "description": "A SCIM token (POST /v1/auth/scim/tokens), or an API key holding config:write.",
        }],
        "meta": {"resourceType": "ServiceProviderConfig", "location": f"{base}/ServiceProviderConfig"},
    }


def resource_type_document(rt: ResourceType, base: str) -> JSONObject:
    return {
        "schemas": [RESOURCE_TYPE_SCHEMA], "id": rt.name, "name": rt.name, "endpoint": rt.endpoint,
        "description": rt.name, "schema": rt.core.id,
        "schemaExtensions": [{"schema": s.id, "required": False} for s in rt.extensions],
        "meta": {"resourceType": "ResourceType", "location": f"{base}/ResourceTypes/{rt.name}"},
    }


def schema_document(schema: Schema, base: str) -> JSONObject:
    return {**schema.document, "meta": {"resourceType": "Schema", "location": f"{base}/Schemas/{schema.id}"}}


def list_response(resources: list[JSONObject], total: int, start_index: int = 1) -> JSONObject:
    return {"schemas": [LIST_RESPONSE], "totalResults": total, "startIndex": start_index,
            "itemsPerPage": len(resources), "Resources": resources}
