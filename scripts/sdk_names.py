"""The SDKs' names: one table for scripts/gen_sdk_python.py and scripts/gen_sdk_typescript.py.

Both SDKs are the same API in two spellings. Every operation is a method of the
resource of its OpenAPI tag: the resource is named by RESOURCES (else after the tag),
the method after the operationId without the resource's noun.

    operationId            Python                         TypeScript
    CreatePersona          client.personas.create         client.personas.create
    StreamChatMessage      client.chat.stream_message     client.chat.streamMessage
    CreateApiKey           client.api_keys.create         client.apiKeys.create
    GetOrganization        client.organizations.get       client.organizations.get

`resource_name(tag)` gives snake_case words and `method_words(tag, operation_id)`
PascalCase; each generator spells them (`snake_case`, `camel_case`). `check_names`
refuses two resources, or two methods of a resource, with one name; `write_or_check`
is how both write their output (or, with --check, compare it). Standard library only; the generators import it as `sdk_names` (scripts/ is sys.path[0] when they run).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

# Tag → (resource name in snake_case, the nouns dropped from its operation ids: `CreatePersona`
# is `personas.create`, `StreamChatMessage` is `chat.stream_message`). The first noun found is
# dropped, so the longer come first. A tag not here: its name in snake_case, dropping the tag's
# name (plural first): `Dashboard` → `dashboard`, `GetDashboardPage` → `get_page`.
RESOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "Admin": ("admin", ()),
    "ApiKey": ("api_keys", ("ApiKeys", "ApiKey")),
    "Audit": ("audit", ("Audit",)),
    "Billing": ("billing", ()),
    "Chat": ("chat", ("Chat",)),
    "Config": ("config", ("ConfigItems", "ConfigItem")),
    "Docs": ("docs", ()),
    "Event": ("events", ("Events", "Event")),
    "File": ("files", ("File",)),
    "Marketplace": ("marketplace", ()),
    "Moderation": ("moderation", ("Moderation",)),
    "OpenAI": ("openai", ()),
    "Organization": ("organizations", ("Organization",)),
    "Persona": ("personas", ("Personas", "Persona")),
    "Portrait": ("portraits", ("Portraits", "Portrait")),
    "Privacy": ("privacy", ("Privacy",)),
    "Probe": ("probes", ()),
    "Scim": ("scim", ("Scim",)),
    "ScimToken": ("scim_tokens", ("ScimTokens", "ScimToken")),
    "Webhook": ("webhooks", ("WebhookEndpoints", "WebhookEndpoint", "Webhook")),
}

# Word boundaries of PascalCase / camelCase: before an upper-case letter that follows a
# lower-case letter or digit, and before the last capital of an acronym (`OpenAIModel`).
_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def words(name: str) -> list[str]:
    """The lower-case words of a name in any case: `GetOpenAIModel` → get, open, ai, model;
    `scim_tokens` → scim, tokens; `Write10` → write10 (digits stay with their word)."""
    return [w.lower() for part in re.split(r"[\W_]+", name) for w in _BOUNDARY.split(part) if w]


def snake_case(name: str) -> str:
    """`StreamMessage` → `stream_message`, `api_keys` → `api_keys`."""
    return "_".join(words(name))


def pascal_case(name: str) -> str:
    """PascalCase: a name without separators keeps its capitals (`OpenAI`), others are
    joined from their words (`api_keys` → `ApiKeys`)."""
    if _IDENTIFIER.match(name) and "_" not in name:
        return name[:1].upper() + name[1:]
    return "".join(w[:1].upper() + w[1:] for w in words(name))


def camel_case(name: str) -> str:
    """`StreamMessage` → `streamMessage`, `api_keys` → `apiKeys`."""
    pascal = pascal_case(name)
    return pascal[:1].lower() + pascal[1:]


def resource_name(tag: str) -> str:
    """The resource of a tag, in snake_case words (`ApiKey` → `api_keys`, `Dashboard` → `dashboard`)."""
    entry = RESOURCES.get(tag)
    return entry[0] if entry is not None else snake_case(tag)


def dropped_nouns(tag: str) -> tuple[str, ...]:
    """The nouns dropped from the operation ids of a tag (`Dashboard`: `Dashboards`, `Dashboard`)."""
    entry = RESOURCES.get(tag)
    return entry[1] if entry is not None else (tag + "s", tag)


def method_words(tag: str, operation_id: str) -> str:
    """The method of an operation in PascalCase: the operationId without the first of its tag's
    nouns it holds as whole words (tag `Persona`: `CreatePersona` → `Create`, `GetPersonaLineage`
    → `GetLineage`; `GetVoiceProfile` → itself). An id that is nothing but the noun keeps it."""
    parts = _BOUNDARY.split(operation_id)
    for noun in dropped_nouns(tag):
        drop = _BOUNDARY.split(noun)
        for at in range(len(parts) - len(drop) + 1):
            if parts[at:at + len(drop)] == drop and len(drop) < len(parts):
                return "".join(parts[:at] + parts[at + len(drop):])
    return operation_id


def check_names(operations: Iterable[tuple[str, str]], who: str) -> dict[str, tuple[str, str]]:
    """operationId → (resource_name, method_words) for (tag, operationId) pairs, refusing two
    resources or two methods of one resource that would have one name in either spelling
    (the same words: `GetAPIKey` and `GetApiKey` are both `get_api_key`)."""
    names: dict[str, tuple[str, str]] = {}
    resources: dict[tuple[str, ...], str] = {}
    methods: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
    for tag, operation_id in operations:
        resource = resource_name(tag)
        other = resources.setdefault(tuple(words(resource)), tag)
        if other != tag:
            raise SystemExit(f"{who}: the tags {other} and {tag} are both the resource {resource}; "
                             "give one its own name in scripts/sdk_names.py RESOURCES")
        method = method_words(tag, operation_id)
        key = (tuple(words(resource)), tuple(words(method)))
        clash = methods.setdefault(key, operation_id)
        if clash != operation_id:
            raise SystemExit(f"{who}: {clash} and {operation_id} are both {resource}.{snake_case(method)}; "
                             "adjust the nouns in scripts/sdk_names.py RESOURCES")
        names[operation_id] = (resource, method)
    return names


def write_or_check(out: Path, text: str, script: str, check: bool) -> int:
    """Writes `out` when it differs from `text`; with `check`, writes nothing and
    answers 1 (naming the script to run) when it differs: make gen-check's drift test."""
    current = out.read_text(encoding="utf-8") if out.exists() else None
    if current == text:
        return 0
    if check:
        print(f"{out} is out of date with gen/openapi.json: run python {script}", file=sys.stderr)
        return 1
    out.write_text(text, encoding="utf-8")
    return 0
