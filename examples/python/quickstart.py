"""The Python SDK's first steps: a persona, a chat session, a reply streamed as it is
written (with its usage and cost), the events the service recorded and a typed error.

    PERSONA_API_KEY=sk_… .venv/bin/python examples/python/quickstart.py

It talks to http://127.0.0.1:$PERSONA_HTTP_PORT (8080 when unset), as the README's quick start
does; PERSONA_BASE_URL points it at any other address."""

import os
import sys

import httpx
from persona_sdk import PersonaClient, ValidationFailedError

BASE_URL = os.environ.get("PERSONA_BASE_URL") or f"http://127.0.0.1:{os.environ.get('PERSONA_HTTP_PORT') or 8080}"
try:  # nothing there: say so at once (the SDK would retry a refused connection for seconds first)
    httpx.get(f"{BASE_URL}/healthz", timeout=5)
except httpx.TransportError as exc:
    sys.exit(f"no Persona Service answers at {BASE_URL} ({type(exc).__name__}: {exc}); start it with `make up`, "
             "or set PERSONA_HTTP_PORT (or PERSONA_BASE_URL) to where it listens")

with PersonaClient(base_url=BASE_URL) as client:  # and PERSONA_API_KEY from the environment
    persona = client.personas.create(intent="A lighthouse keeper who collects weather proverbs")
    print(f"persona {persona.id}: {persona.display_name} ({persona.state})")

    session = client.chat.create_session(persona_id=persona.id)
    with client.chat.stream_message(session.session_id, content="What does a red sky mean?") as stream:
        for text in stream.text_deltas():  # resumed with Last-Event-ID if the connection drops
            print(text, end="", flush=True)
        reply = stream.get_final_message()
    usage = reply.usage
    print(f"\n{usage.input_tokens} tokens in, {usage.output_tokens} out, ${usage.cost_usd_micros / 1e6:.6f}")

    for event in client.events.list_iter(type="persona.created", limit=5):
        print("event", event.type, event.id)

    try:
        client.personas.create(intent="")
    except ValidationFailedError as err:  # every catalogue code has its class
        print("refused:", err.code, err.message, "request", err.request_id)
