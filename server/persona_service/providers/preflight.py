"""What `up` and `status` say about each configured model provider before the first request (issue 48):
whether its server answers, takes the key, and has the model (`GET <base URL>/models`, which OpenAI,
Ollama, vLLM and llama.cpp's server all serve). The local providers (the default) need no check.

Warnings only: a provider down at start may be up by the first request (a model server started after
the service, a model pulled later), and every other part of the service works without it, so nothing
here refuses to start. `up` prints the findings in its banner with a warning, `status` asks again."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from persona_service.providers.settings import ProviderSettings


@dataclass(frozen=True)
class Probe:
    """One remote provider to ask: its part, base URL, key and model, and the settings that name them."""

    part: str  # chat, moderation, embeddings, images
    url: str
    key: str
    model: str
    model_setting: str
    key_setting: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, str]) -> Probe:
        return cls(**{name: str(value.get(name, "")) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Finding:
    """What one probe found: `problem` None when the server answers and lists the model (or lists none)."""

    part: str
    model: str
    url: str  # shown without credentials or query
    problem: str | None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None

    def line(self) -> str:
        if self.problem is not None:
            return f"{self.part}: {self.problem}"
        return f"{self.part}: model `{self.model}` at {self.url}: OK{self.note}"

    def to_json(self) -> dict[str, object]:
        return {"part": self.part, "model": self.model, "url": self.url, "ok": self.ok, "says": self.line()}


def probes(settings: ProviderSettings) -> list[Probe]:
    """Every provider configured as remote (none with the defaults)."""
    found = []
    for part, key, model_setting, own_key in (
            ("chat", "chat", "openai_model", "openai_api_key"),
            ("moderation", "moderation", "openai_moderation_model", "moderation_api_key"),
            ("embeddings", "embedding", "openai_embedding_model", "embedding_api_key")):
        upstream = settings.upstream(key)
        if upstream is not None:
            found.append(Probe(part, upstream[0], upstream[1], str(getattr(settings, model_setting)),
                               _env(model_setting), _env(own_key)))
    if settings.image_provider == "openai":
        found.append(Probe("images", settings.image_base_url, settings.image_api_key or settings.openai_api_key,
                           settings.image_model, _env("image_model"), _env("image_api_key")))
    return found


def run(found: list[Probe], timeout: float = 3.0) -> list[Finding]:
    """Each probe's finding, in order; a server shared by several parts is asked once."""
    answers: dict[tuple[str, str], tuple[set[str] | None, str | None]] = {}
    findings = []
    for probe in found:
        if (probe.url, probe.key) not in answers:
            answers[(probe.url, probe.key)] = _models(probe.url, probe.key, timeout)
        models, failure = answers[(probe.url, probe.key)]
        where = shown(probe.url)
        at = f"model `{probe.model}` at {where}"
        if failure is not None:
            problem = f"{at}: {failure.replace('{key}', probe.key_setting)}"
            findings.append(Finding(probe.part, probe.model, where, problem))
        elif models is None:
            findings.append(Finding(probe.part, probe.model, where, None,
                                    " (reachable; it lists no models, so the model is not checked)"))
        elif probe.model in models or f"{probe.model}:latest" in models:  # (Ollama's tag)
            findings.append(Finding(probe.part, probe.model, where, None))
        else:
            listed = ", ".join(sorted(models)[:8]) + (", …" if len(models) > 8 else "") if models else "none"
            findings.append(Finding(probe.part, probe.model, where, (
                f"model `{probe.model}` not found at {where}: the server offers: {listed}; set "
                f"{probe.model_setting} to one it offers, or pull it there")))
    return findings


def check(settings: ProviderSettings, timeout: float = 3.0) -> list[str]:
    """One line per problem found (none: every remote provider answers and has its model)."""
    return [f.line() for f in run(probes(settings), timeout) if not f.ok]


def shown(url: str) -> str:
    """A base URL without credentials or query, as a banner may print it."""
    parts = urlsplit(url)
    host = parts.hostname or "" if parts.port is None else f"{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _env(field: str) -> str:
    return f"PERSONA_{field.upper()}"


def _models(url: str, key: str, timeout: float) -> tuple[set[str] | None, str | None]:
    """The model ids the server lists (None: it lists none we can read), or why it could not be asked
    (`{key}` in it: the key's setting)."""
    request = urllib.request.Request(url.rstrip("/") + "/models", headers={"Accept": "application/json",
                                     **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = json.loads(answer.read(1_000_000) or b"null")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return None, f"the API key is refused ({exc.code}); set {{key}}"
        if exc.code == 404:
            return None, None  # a server that lists no models: not checked
        return None, f"the server answers {exc.code} to GET /models"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"not reachable ({reason}); is the model server running there?"
    except ValueError:
        return None, "GET /models did not answer JSON; is this an OpenAI-compatible base URL (ending in /v1)?"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, None
    return {str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")}, None
