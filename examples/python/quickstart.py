"""The Python SDK's first steps: a persona, a chat session, a reply streamed as it is
written (with its usage and cost), the events the service recorded and a typed error.

    PERSONA_API_KEY=sk_… .venv/bin/python examples/python/quickstart.py

PERSONA_BASE_URL points it at another address than http://127.0.0.1:8080."""

from persona_sdk import PersonaClient, ValidationFailedError

with PersonaClient() as client:  # PERSONA_API_KEY and PERSONA_BASE_URL from the environment
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
