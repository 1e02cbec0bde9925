"""The floor's constant answer, and the same answer served by connectrpc's gRPC
protocol inside Envoy's own process (pyvoy), for scripts/bench_floors.py.

pyvoy loads `bench_floor_pyvoy:asgi` or `bench_floor_pyvoy:wsgi` (built on
first use, so the project's own environment, which has no connectrpc, can
import `answer` from here). Run by pyvoy's Python to edit a rendered edge
configuration (the router replaced by pyvoy's terminal filter):

    PYVOY_PYTHON scripts/bench_floor_pyvoy.py CONFIG.yaml asgi|wsgi
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys

from persona.v1 import chat_pb2

SESSION = "chs_01JH3K4M5N6P7Q8R9S0T1V2W3X"
SERVICE = "persona.v1.ChatService"


@functools.cache
def answer() -> chat_pb2.ChatSession:
    """A session as the hot read returns it: the benchmark's own, field for field."""
    m = chat_pb2.ChatSession(
        session_id=SESSION, org_id="org_01JH3K4M5N6P7Q8R9S0T1V2W3X", workspace_id="wks_01JH3K4M5N6P7Q8R9S0T1V2W3X",
        persona_id="per_01JH3K4M5N6P7Q8R9S0T1V2W3X", user_id="usr_01JH3K4M5N6P7Q8R9S0T1V2W3X",
        title="A patient librarian who answers in short sentences", status="active",
    )
    m.started_at.FromSeconds(1_764_000_000)
    m.last_active_at.FromSeconds(1_764_000_100)
    m.ended_at.null_value = 0
    return m


def _method():
    from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType

    return MethodInfo(name="GetChatSession", service_name=SERVICE, input=chat_pb2.GetChatSessionRequest,
                      output=chat_pb2.ChatSession, idempotency_level=IdempotencyLevel.NO_SIDE_EFFECTS,
                      stream_type=StreamType.UNARY)


def _asgi():
    from connectrpc.compat import google_protobuf_codecs
    from connectrpc.server import ConnectASGIApplication, Endpoint

    async def get(request, ctx):
        return answer()

    class App(ConnectASGIApplication):
        path = f"/{SERVICE}"

    return App(service=None, endpoints=lambda _: {f"/{SERVICE}/GetChatSession": Endpoint.unary(_method(), get)},
               codecs=google_protobuf_codecs(), compressions=[])


def _wsgi():
    from connectrpc.compat import google_protobuf_codecs
    from connectrpc.server import ConnectWSGIApplication, EndpointSync

    class App(ConnectWSGIApplication):
        path = f"/{SERVICE}"

    endpoint = EndpointSync.unary(method=_method(), function=lambda request, ctx: answer())
    return App(endpoints={f"/{SERVICE}/GetChatSession": endpoint}, codecs=google_protobuf_codecs(),
               compressions=[])


def __getattr__(name: str):
    if name in ("asgi", "wsgi"):
        app = _asgi() if name == "asgi" else _wsgi()
        globals()[name] = app
        return app
    raise AttributeError(name)


def terminal(config_path: pathlib.Path, interface: str) -> None:
    """The edge's router replaced by pyvoy's terminal filter serving this module's app."""
    import pyvoy
    import yaml

    config = yaml.safe_load(config_path.read_text())
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    so = pathlib.Path(pyvoy.__file__).with_name("_pyvoy.abi3.so")
    hcm["http_filters"][-1] = {"name": "pyvoy", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
        "dynamic_module_config": {"module": {"local": {"filename": str(so)}}},
        "filter_name": "pyvoy", "terminal_filter": True,
        "filter_config": {"@type": "type.googleapis.com/google.protobuf.StringValue",
                          "value": json.dumps({"app": f"bench_floor_pyvoy:{interface}", "interface": interface,
                                               "root_path": ""})},
    }}
    config_path.write_text(yaml.safe_dump(config))


if __name__ == "__main__":
    terminal(pathlib.Path(sys.argv[1]), sys.argv[2])
