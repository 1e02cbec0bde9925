"""What `up` and `status` say about each configured model provider before the first request (issue 48):
whether its server answers, takes the key, and has the model (`GET <base URL>/models`, which OpenAI,
Ollama, vLLM and llama.cpp's server all serve). Warnings only: a provider down at start may be up by
the first request, so nothing here refuses to start."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from persona_service.providers.settings import ProviderSettings

# (part, its model's setting) of each provider that may be remote.
_PARTS = (("chat", "openai_model"), ("moderation", "openai_moderation_model"),
          ("embedding", "openai_embedding_model"))


def check(settings: ProviderSettings, timeout: float = 3.0) -> list[str]:
    """One line per problem found (none: every remote provider answers and has its model)."""
    from persona_service.providers.factory import _shown

    problems: list[str] = []
    seen: dict[tuple[str, str], tuple[set[str] | None, str | None]] = {}
    for part, setting in _PARTS:
        upstream = settings.upstream(part)
        if upstream is None:
            continue
        url, key = upstream
        model = str(getattr(settings, setting))
        if (url, key) not in seen:
            seen[(url, key)] = _models(url, key, timeout)
        models, failure = seen[(url, key)]
        where = _shown(url)
        if failure is not None:
            problems.append(f"{part}: {where}: {failure}")
        elif models is not None and model not in models and f"{model}:latest" not in models:  # (Ollama's tag)
            listed = ", ".join(sorted(models)[:8]) or "none"
            problems.append(f"{part}: {where} has no model `{model}` (it lists: {listed}); "
                            f"set the model's name it serves, or pull it")
    return problems


def _models(url: str, key: str, timeout: float) -> tuple[set[str] | None, str | None]:
    """The model ids the server lists (None: it lists none we can read), or why it could not be asked."""
    request = urllib.request.Request(url.rstrip("/") + "/models", headers={"Accept": "application/json",
                                     **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = json.loads(answer.read(1_000_000) or b"null")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return None, f"the API key is refused ({exc.code}); set the provider's …_API_KEY"
        if exc.code == 404:
            return None, None  # a server that lists no models: not checked
        return None, f"answers {exc.code} to GET /models"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"not reachable ({reason}); is the model server running there?"
    except ValueError:
        return None, "GET /models did not answer JSON; is this an OpenAI-compatible base URL (ending in /v1)?"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, None
    return {str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")}, None
