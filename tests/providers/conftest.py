"""Provider test fixtures: `openai_stub` (a real OpenAI-compatible HTTP server
on 127.0.0.1, reset per test). Other test packages can reuse it with
`from providers.openai_stub import openai_stub, openai_stub_server`."""

from providers.openai_stub import openai_stub, openai_stub_server  # noqa: F401
