"""Character Card V2 export and import over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/cards.py; contract in personas.proto:
"What the card holds round trips losslessly (export after import gives the
same card, apart from the new persona's identity in the extension)")."""

from __future__ import annotations

import copy

import pytest
from support import assert_envelope

EXT = "persona-service"
IDENTITY = ("personaId", "slug", "lineage")

THIRD_PARTY = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Captain Mirela Voss",
        "description": "A weathered airship captain who smuggles books into cities that banned them.",
        "personality": "dry, loyal, reckless",
        "scenario": "{{user}} stows away on the Wren during a storm over the Carpathians.",
        "first_mes": "*The hatch creaks open.* Well. You're either very brave or very lost.",
        "mes_example": "<START>\n{{user}}: Why books?\n{{char}}: Because paper remembers what people forget.\n"
                       "<START>\n{{user}}: Are we safe?\n{{char}}: Nobody on the Wren is ever safe. That's the charm.",
        "creator_notes": "Works best with slow-burn adventure.",
        "system_prompt": "You are Captain Mirela Voss of the airship Wren. Never break character.",
        "post_history_instructions": "Keep replies under 120 words.",
        "alternate_greetings": ["Another stowaway? The Wren attracts them like moths.",
                                "*She doesn't look up from the map.* Sit. Don't touch anything."],
        "tags": ["adventure", "steampunk", "smuggler"],
        "creator": "someone@example.com",
        "character_version": "3.1",
        "extensions": {"depth_prompt": {"depth": 4, "prompt": "Mirela distrusts the Guild."}, "fav": True},
    },
}


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="pro")


def export(http, tenant, persona_id) -> dict:
    r = http.get(f"/v1/personas/{persona_id}/card", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def import_card(http, tenant, card) -> dict:
    r = http.post("/v1/personas/import", json=card, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def without_identity(card: dict) -> dict:
    card = copy.deepcopy(card)
    ours = card["data"]["extensions"][EXT]
    for key in IDENTITY:
        ours.pop(key, None)
    return card


def without_ours(card: dict) -> dict:
    card = copy.deepcopy(card)
    card["data"]["extensions"].pop(EXT, None)
    return card


def test_export_maps_the_persona(http, org):
    r = http.post("/v1/personas", json={"intent": "A grumpy lighthouse keeper who loves jazz",
                                         "metadata": {"campaign": "autumn"}, "visibility": "org"}, headers=org.auth)
    assert r.status_code == 200, r.text
    persona = r.json()
    voice = http.get(f"/v1/personas/{persona['id']}/voice", headers=org.auth).json()

    card = export(http, org, persona["id"])
    assert card["spec"] == "chara_card_v2" and card["spec_version"] == "2.0"
    data = card["data"]
    assert data["name"] == persona["displayName"]
    assert data["first_mes"] == voice["greeting"]
    assert data["system_prompt"] == voice["systemPrompt"]
    assert "<START>" in data["mes_example"]
    assert data["mes_example"].count("<START>") == len(voice["sampleDialogues"])
    for dialogue in voice["sampleDialogues"]:
        assert f"{{{{user}}}}: {dialogue['user']}" in data["mes_example"]
        assert f"{{{{char}}}}: {dialogue['persona']}" in data["mes_example"]
    assert persona["soul"]["desire"] in data["description"]
    assert data["personality"] == ", ".join(persona["soul"]["traits"])
    ours = data["extensions"][EXT]
    assert ours["personaId"] == persona["id"] and ours["slug"] == persona["slug"]
    assert ours["intent"] == persona["intent"]
    assert ours["visibility"] == "org" and ours["metadata"] == {"campaign": "autumn"}
    assert ours["soul"]["desire"] == persona["soul"]["desire"]
    lineage = ours["lineage"]
    assert lineage["rootId"] == persona["id"] and lineage["parentId"] == ""
    assert [v["kind"] for v in lineage["versions"]] == ["create"]


@pytest.mark.parametrize("where", ["same workspace", "another organization"])
def test_our_card_round_trips(http, org, tenants, where):
    r = http.post("/v1/personas", json={"intent": f"A shy botanist who sings to her ferns ({where})",
                                         "metadata": {"k": "v"}}, headers=org.auth)
    assert r.status_code == 200, r.text
    original = r.json()
    card = export(http, org, original["id"])

    # The same workspace still holds the original (and the slug of its name).
    target = org if where == "same workspace" else tenants(plan="pro")
    imported = import_card(http, target, card)
    assert imported["id"] != original["id"]
    assert imported["state"] == "active" and imported["version"] == 1
    assert imported["soul"] == original["soul"]
    assert imported["intent"] == original["intent"]
    assert imported["metadata"] == {"k": "v"}
    assert imported["displayName"] == original["displayName"]
    assert imported["parentId"] == "" and imported["rootId"] == imported["id"]
    if target is org:
        assert imported["slug"] != original["slug"]

    again = export(http, target, imported["id"])
    assert without_identity(again) == without_identity(card)
    ours = again["data"]["extensions"][EXT]
    assert ours["personaId"] == imported["id"] and ours["slug"] == imported["slug"]
    assert ours["lineage"]["rootId"] == imported["id"]
    assert [v["kind"] for v in ours["lineage"]["versions"]] == ["import"]

    voice = http.get(f"/v1/personas/{imported['id']}/voice", headers=target.auth).json()
    assert voice["systemPrompt"] == card["data"]["system_prompt"]
    assert voice["greeting"] == card["data"]["first_mes"]
    assert voice["fingerprintDimensions"] > 0

    # The import is a generation run of kind `import`, and a persona.created.
    r = http.get("/v1/events", params={"personaId": imported["id"]}, headers=target.auth)
    types = [(e["type"], e["data"].get("kind", "")) for e in r.json()["items"]]
    assert types == [("persona.created", ""), ("generation.run.completed", "import"),
                     ("generation.run.started", "import")]


def test_a_third_party_card_round_trips(http, org, tenants):
    for tenant in (org, tenants(plan="pro")):  # (once per workspace: see test_importing_a_card_twice)
        persona = import_card(http, tenant, THIRD_PARTY)
        assert persona["displayName"] == "Captain Mirela Voss"
        assert persona["soul"]["name"] == "Captain Mirela Voss"
        assert len(persona["soul"]["desire"]) >= 20
        assert persona["soul"]["traits"] == ["dry", "loyal", "reckless"]
        assert persona["visibility"] == "private"

        card = export(http, tenant, persona["id"])
        assert card["spec"] == "chara_card_v2" and card["spec_version"] == "2.0"
        assert without_ours(card) == THIRD_PARTY
        assert card["data"]["extensions"][EXT]["personaId"] == persona["id"]

        voice = http.get(f"/v1/personas/{persona['id']}/voice", headers=tenant.auth).json()
        assert voice["systemPrompt"] == THIRD_PARTY["data"]["system_prompt"]
        assert voice["greeting"] == THIRD_PARTY["data"]["first_mes"]
        assert voice["sampleDialogues"] == [
            {"user": "Why books?", "persona": "Because paper remembers what people forget."},
            {"user": "Are we safe?", "persona": "Nobody on the Wren is ever safe. That's the charm."},
        ]


def test_an_imported_card_can_be_regenerated_and_refined(http, org):
    card = copy.deepcopy(THIRD_PARTY)
    card["data"]["name"] = "Brother Anselm"
    card["data"]["description"] = "A monk who keeps bees and secrets in equal measure."
    persona = import_card(http, org, card)
    r = http.post(f"/v1/personas/{persona['id']}/regenerate", json={"fromStep": "audit"}, headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 2
    r = http.post(f"/v1/personas/{persona['id']}/refine", json={"instruction": "Make him more funny"},
                  headers=org.auth)
    assert r.status_code == 200, r.text
    changed = export(http, org, persona["id"])
    assert changed["data"]["character_version"] == "3"
    assert changed["data"]["tags"] == card["data"]["tags"]
    assert changed["data"]["extensions"]["depth_prompt"] == card["data"]["extensions"]["depth_prompt"]


def test_import_validation(http, org):
    r = http.post("/v1/personas/import", json={"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": ""}},
                  headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert any(e["path"].endswith("name") for e in error["details"]["validationErrors"]), error
    r = http.post("/v1/personas/import", json={"spec": "tavern_card", "data": {"name": "X"}}, headers=org.auth)
    assert_envelope(r, 422, "validation_failed")


def test_importing_a_card_twice_gives_two_personas(http, tenants):
    """Import derives the slug from the card's name; a second import of the
    same card into one workspace must not collide with the first."""
    t = tenants(plan="pro")
    first = import_card(http, t, THIRD_PARTY)
    second = import_card(http, t, THIRD_PARTY)
    assert first["id"] != second["id"] and first["slug"] != second["slug"]
    assert without_ours(export(http, t, second["id"])) == THIRD_PARTY


@pytest.mark.parametrize(("ours", "path", "code"), [
    ("not an object", "data.extensions.persona-service", "type"),
    ({"soul": "abc"}, "data.extensions.persona-service.soul", "type"),
    ({"soul": {"name": 5}}, "data.extensions.persona-service.soul.name", "type"),
    ({"soul": {"traits": 7}}, "data.extensions.persona-service.soul.traits", "type"),
    ({"soul": {"traits": ["kind", 3]}}, "data.extensions.persona-service.soul.traits", "type"),
    ({"intent": 5}, "data.extensions.persona-service.intent", "type"),
    ({"intent": "x" * 2001}, "data.extensions.persona-service.intent", "max_length"),
    ({"metadata": "m"}, "data.extensions.persona-service.metadata", "type"),
    ({"visibility": "everyone"}, "data.extensions.persona-service.visibility", "one_of"),
])
def test_our_extension_is_checked_like_a_create(http, org, ours, path, code):
    """A card's `persona-service` extension is any JSON: what it sets of a persona is checked as CreatePersona
    checks it (a 422 naming the field), never a 500 nor a persona stored with a value outside the contract."""
    card = copy.deepcopy(THIRD_PARTY)
    card["data"]["extensions"][EXT] = ours
    r = http.post("/v1/personas/import", json=card, headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert [(e["path"], e["code"]) for e in error["details"]["validationErrors"]] == [(path, code)], error
    assert f"`{path}` must" in error["message"], error
