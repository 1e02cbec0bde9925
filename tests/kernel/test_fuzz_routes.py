"""Bounded fuzzing of every route through Envoy: whatever the path values,
query parameters and JSON body, the answer is never a 5xx, and every error
is exactly the envelope with `application/json` (or the route's declared
error shape: the portrait edit's `{"error": "<code>", "message", ...}`,
SCIM's error schema as `application/scim+json`)."""

from __future__ import annotations

import re

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persona.v1 import options_pb2
from persona_service.portraits.module import PORTRAIT_STATUSES
from persona_service.registry import MODULES

EXAMPLES_PER_ROUTE = 12
_VARIABLE = re.compile(r"\{([^}=]+)(=[^}]*)?\}")


def _routes() -> list[tuple[str, str, bool, int]]:
    """(HTTP method, path template, takes a body, error shape) of every binding."""
    pool = descriptor_pool.Default()
    routes = []
    for name in MODULES.service_names:
        for method in pool.FindServiceByName(name).methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            shape = method.GetOptions().Extensions[options_pb2.policy].error_shape
            for binding in [rule, *rule.additional_bindings]:
                kind = binding.WhichOneof("pattern")
                if kind and kind != "custom":
                    routes.append((kind.upper(), getattr(binding, kind), bool(binding.body), shape))
    return sorted(set(routes))


ROUTES = _routes()

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40), st.sampled_from(["", "\u0000", "persona.created", "*", "personas:read", "x" * 600]),
)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
path_values = st.one_of(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#%"), min_size=1, max_size=30),
                        st.sampled_from(["chs_x", "inv_1", "00000000-0000-0000-0000-000000000000", "whe_1"]))
query = st.dictionaries(st.sampled_from(["limit", "cursor", "showDeleted", "bogus", "type"]),
                        st.text(max_size=20), max_size=3)


def _documented_503(response) -> bool:
    """The 5xx that are not faults: a feature that is not configured (the
    spec's DSAR build), and SCIM's 501 for a search it does not offer."""
    if response.status_code == 501:
        return response.request.url.path == "/v1/auth/scim/v2/.search"
    if response.status_code != 503:
        return False
    error = response.json()["error"]
    return error["code"] == "service_unavailable" and "feature" in error["details"]


def _assert_not_5xx_and_shaped(response, shape: int) -> None:
    assert response.status_code < 500 or _documented_503(response), \
        f"{response.request.method} {response.request.url}: {response.text[:500]}"
    if response.status_code >= 400 and shape == options_pb2.ERROR_SHAPE_SCIM:
        # Every reply under a SCIM base is SCIM's error schema, Envoy's own included.
        assert response.headers["content-type"] == "application/scim+json", response.text[:300]
        body = response.json()
        assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"], body
        assert body["status"] == str(response.status_code) and isinstance(body["detail"], str), body
        assert set(body) <= {"schemas", "status", "detail", "scimType", "error"}, body
        assert ("error" in body) == (response.status_code == 422), body
    elif response.status_code >= 400:
        assert response.headers["content-type"] == "application/json", response.text[:300]
        body = response.json()
        if shape == options_pb2.ERROR_SHAPE_PORTRAIT and isinstance(body.get("error"), str):
            # The portrait shape only for the statuses the spec gives it (the others, and the replies
            # Envoy makes itself where no route matched, are the envelope).
            assert response.status_code in PORTRAIT_STATUSES and isinstance(body["message"], str), body
        elif shape == options_pb2.ERROR_SHAPE_OPENAI:  # the envelope plus OpenAI's type and param
            assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details", "type", "param"}, body
        else:
            assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body


@pytest.mark.parametrize(("verb", "template", "has_body", "shape"), ROUTES, ids=[f"{v} {t}" for v, t, _, _ in ROUTES])
def test_route_never_answers_5xx(http, tenants, verb, template, has_body, shape):
    tenant = tenants(plan="enterprise")

    @settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(values=st.lists(path_values, min_size=3, max_size=3), params=query, body=json_values)
    def probe(values, params, body):
        iterator = iter(values)
        path = _VARIABLE.sub(lambda _: next(iterator), template)
        kwargs = {"json": body} if has_body else {}
        response = http.request(verb, path, params=params, headers=tenant.auth, **kwargs)
        _assert_not_5xx_and_shaped(response, shape)

    probe()
