"""The dashboard in a real browser (Chromium through Playwright) against the
real stack, through the edge, as a user drives it: sign in with an API key,
create a key and see its secret once, create a persona and watch its steps
stream, chat in the playground and see the reply stream, add a webhook
endpoint on a local receiver, ping it and replay a delivery, change the plan
and open the invoice's PDF; every page at desktop and phone width, by
keyboard too. Screenshots of each page go to pytest's tmp dir."""

from __future__ import annotations

import re

from persona_sdk.webhooks import verify as verify_signature
from playwright.sync_api import expect
from sqlalchemy import text
from support import bootstrap, personas_locked
from webhooks.wh_receiver import Answer

STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
PAGES = ["Personas", "Playground", "API keys", "Webhooks", "Usage", "Billing", "Audit log", "Events"]
PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1400, "height": 900}
LAPTOP = {"width": 1280, "height": 800}
SCOPES = ["personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write"]
REQUEST_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def sign_in(page, key: str) -> None:
    page.goto("/dashboard")
    page.get_by_label("API key or session JWT").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()


def go(page, label: str) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name=label, exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(label)


def settled(page) -> None:
    """Every list and panel has loaded."""
    expect(page.locator("main .loading")).to_have_count(0)


def shoot(page, screenshots, name: str) -> None:
    page.screenshot(path=screenshots / f"{name}.png", full_page=True)


# The words (runs of non-space characters) of an element's text that a line break splits: a word whose
# range has client rects on more than one line.
SPLIT_WORDS = """root => {
  const split = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const word of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (lines.size > 1) split.push(word[0]);
    }
  }
  return split;
}"""
# What an element shows cut short (overflow hidden, wider than its box): its text and its title.
CLIPPED = """root => [...root.querySelectorAll("td *")]
  .filter((el) => getComputedStyle(el).overflowX === "hidden" && el.scrollWidth > el.clientWidth + 1)
  .map((el) => [el.textContent, el.title])"""
# The icon the browser fetches for the page: its <link rel=icon>, else /favicon.ico.
ICON = """() => (document.querySelector('link[rel~="icon"]') || {}).href || new URL("/favicon.ico", location.href).href"""


def reads_whole(page, table) -> None:
    """No word of the table is split across lines, what is cut short has its
    whole text in its title, and the table fits its page (no sideways scroll)."""
    assert page.evaluate(SPLIT_WORDS, table.element_handle()) == []
    clipped = page.evaluate(CLIPPED, table.element_handle())
    assert all(text == title for text, title in clipped), clipped
    assert page.evaluate("el => el.scrollWidth - el.clientWidth", table.element_handle()) <= 0


def make_persona(http, tenant, intent="A grumpy lighthouse keeper who loves jazz") -> str:
    r = http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()["id"]


def test_sign_in_then_a_new_key_shows_its_secret_once(page, http, stack, screenshots):
    # The key a new user has: the one `persona-service bootstrap` prints.
    booted = bootstrap(stack, org_name="Dashboard Org", plan="pro", region="us")
    # A refused credential: the envelope's message, its code and the request id.
    page.goto("/dashboard")
    shoot(page, screenshots, "sign-in")
    page.get_by_label("API key or session JWT").fill("sk_live_not-a-key")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("unauthorized")
    expect(alert.locator(".request-id")).to_have_text(REQUEST_ID)

    page.get_by_label("API key or session JWT").fill(booted["apiKey"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("banner")).to_contain_text("Dashboard Org")
    expect(page.get_by_role("banner")).to_contain_text("pro")
    assert page.evaluate("document.cookie") == ""
    go(page, "API keys")
    page.get_by_label("Name", exact=True).fill("dashboard key")
    page.get_by_label("personas:write").check()
    page.get_by_role("button", name="Create key").click()
    secret = page.locator(".secret-value")
    expect(secret).to_have_text(re.compile(r"^sk_live_\S{20,}$"))
    value = secret.inner_text()
    expect(page.locator(".secret").get_by_role("button", name="Copy")).to_be_visible()
    row = page.get_by_role("row").filter(has_text="dashboard key")
    expect(row).to_contain_text(value[:12])
    expect(row).to_contain_text("personas:write")
    shoot(page, screenshots, "api-keys")
    # The secret is a working credential with the scopes chosen.
    assert http.get("/v1/personas", headers={"Authorization": f"Bearer {value}"}).status_code == 200

    # Shown once: gone after leaving the page, and never listed.
    go(page, "Personas")
    go(page, "API keys")
    expect(row).to_be_visible()
    assert value not in page.content()

    row.get_by_role("button", name="Revoke dashboard key").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(row).to_contain_text("revoked")
    assert http.get("/v1/personas", headers={"Authorization": f"Bearer {value}"}).status_code == 401


def test_a_session_jwt_signs_in_and_the_tab_forgets_it_on_sign_out(page, tenants, jwt_minter):
    tenant = tenants()
    sign_in(page, jwt_minter.mint_session(tenant.user_id, tenant.org_id, tenant.workspace_id))
    banner = page.get_by_role("banner")
    expect(banner).to_contain_text("session")
    expect(banner).to_contain_text("Tenant")
    # Kept in this tab's sessionStorage only: a reload stays signed in, signing out forgets it.
    page.reload()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key or session JWT")).to_be_focused()
    assert page.evaluate("sessionStorage.length") == 0 and page.evaluate("document.cookie") == ""


def test_a_new_persona_streams_its_steps_live(page, engine, tenants, screenshots):
    tenant = tenants()
    sign_in(page, tenant.api_key)
    page.get_by_role("link", name="New persona").click()
    page.get_by_label("Intent").fill("A wistful clockmaker who repairs music boxes")
    steps = page.get_by_role("list", name="Generation steps")
    with personas_locked(engine) as lock, page.expect_response(lambda r: "/v1/personas?stream=true" in r.url) as opened:
        page.get_by_role("button", name="Generate").click()
        for step in STEPS:
            expect(steps.locator(f'li[data-step="{step}"].done')).to_contain_text("done in")
        # Every step is on screen while the persona cannot be written yet: streamed, not buffered.
        expect(page.get_by_role("link", name="Open persona")).to_have_count(0)
        shoot(page, screenshots, "persona-streaming")
        lock.rollback()
    expect(steps.locator('li[data-step="end"]')).to_contain_text("completed")
    # One run, one id: the stream's (X-Run-Id), wherever the steps name it.
    assert set(re.findall(r"run_\w+", steps.inner_text())) == {opened.value.header_value("x-run-id")}
    page.get_by_role("link", name="Open persona").click()

    # The persona's page: soul, voice, lineage, portraits, actions.
    expect(page.get_by_role("heading", level=1)).to_contain_text("active")
    expect(page.get_by_role("region", name="Soul")).to_contain_text("Desire")
    expect(page.get_by_role("region", name="Voice")).to_contain_text("Greeting")
    expect(page.locator("svg.lineage a.node.current")).to_have_count(1)
    expect(page.get_by_role("region", name="Portraits")).to_contain_text("No portraits yet.")
    page.get_by_role("button", name="Generate portrait").click()
    image = page.get_by_role("region", name="Portraits").locator("img").first
    expect(image).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    settled(page)
    shoot(page, screenshots, "persona-detail")

    fork = page.get_by_role("form", name="Fork")
    fork.get_by_label("Note (lineage)").fill("a darker sibling")
    fork.get_by_role("button", name="Fork").click()
    expect(page).to_have_url(re.compile(r"#/personas/[0-9a-f-]{36}$"))
    expect(page.locator("svg.lineage a.node")).to_have_count(2)
    expect(page.locator("svg.lineage a.node.current")).to_contain_text("fork 1")
    settled(page)
    shoot(page, screenshots, "persona-fork-lineage")

    title = page.get_by_role("heading", level=1)
    page.get_by_role("button", name="Audit").click()
    expect(page.get_by_role("status").filter(has_text="Audit passed")).to_contain_text("threshold")
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(title).to_contain_text("deleted")
    expect(page.get_by_text("purged for good")).to_be_visible()
    page.get_by_role("button", name="Restore").click()
    expect(title).to_contain_text("active")
    page.get_by_role("button", name="Archive").click()
    page.get_by_role("dialog").get_by_role("button", name="Archive").click()
    expect(title).to_contain_text("archived")
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)  # archived: read-only
    go(page, "Personas")
    expect(page.get_by_role("row")).to_have_count(3)  # the header, the persona and its fork
    page.get_by_label("Search").fill("no such persona")
    expect(page.get_by_text("No persona matches the search.")).to_be_visible()


def test_the_persona_list_is_searched_and_sorted_by_the_server(page, http, tenants):
    tenant = tenants()
    for name in ("Wilhelmina Tern", "Aurelio Tern", "Mabel Gannet"):
        r = http.post("/v1/personas", json={"intent": f"{name}, a seabird counter", "displayName": name},
                      headers=tenant.auth)
        assert r.status_code == 200, r.text
    sign_in(page, tenant.api_key)
    settled(page)
    names = page.get_by_role("table", name="Personas").locator("tbody tr td:first-child")
    expect(names).to_have_text(["Mabel Gannet", "Aurelio Tern", "Wilhelmina Tern"])  # newest first
    with page.expect_request(lambda r: "/v1/personas?" in r.url and "q=TERN" in r.url):
        page.get_by_label("Search").fill("TERN")
    expect(names).to_have_text(["Aurelio Tern", "Wilhelmina Tern"])
    with page.expect_request(lambda r: "orderBy=display_name+desc" in r.url or "orderBy=display_name%20desc" in r.url):
        page.get_by_label("Sort").select_option("display_name desc")
    expect(names).to_have_text(["Wilhelmina Tern", "Aurelio Tern"])
    page.get_by_label("Search").fill("petrel")
    expect(page.get_by_text("No persona matches the search.")).to_be_visible()


def test_versions_are_compared_and_rolled_back_and_a_create_is_previewed(page, http, tenants, engine, screenshots):
    tenant = tenants()
    pid = make_persona(http, tenant, "A soft-spoken ferry pilot who collects river maps")
    r = http.post(f"/v1/personas/{pid}/refine", json={"instruction": "louder and bolder", "note": "bolder"},
                  headers=tenant.auth)
    assert r.status_code == 200, r.text
    sign_in(page, tenant.api_key)
    page.goto(f"/dashboard#/personas/{pid}")
    versions = page.get_by_role("region", name="Versions")
    table = versions.get_by_role("table", name="Versions")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tbody tr").first).to_contain_text("v2 (current)")
    expect(table.locator("tbody tr").first).to_contain_text("bolder")
    versions.get_by_role("button", name="Compare").click()
    changes = versions.get_by_role("table", name="Changes from v1 to v2")
    expect(changes).to_contain_text("soul.")
    versions.get_by_role("button", name="View").last.click()
    expect(versions.get_by_label("Version 1")).to_contain_text(f"persona://{pid}@1")
    settled(page)
    shoot(page, screenshots, "persona-versions")
    versions.get_by_role("button", name="Roll back to v1").click()
    page.get_by_role("dialog").get_by_role("button", name="Roll back").click()
    expect(page.get_by_role("heading", level=1).locator("xpath=following-sibling::p[1]")).to_contain_text("v3")
    expect(table.locator("tbody tr").first).to_contain_text("rollback to v1")
    assert http.get(f"/v1/personas/{pid}", headers=tenant.auth).json()["version"] == 3

    # The cost preview: an estimate on screen, nothing created or spent.
    def personas() -> int:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM personas WHERE org_id = :o"), {"o": tenant.org_id}).scalar()

    before = personas()
    go(page, "Personas")
    page.get_by_role("link", name="New persona").click()
    page.get_by_label("Intent").fill("A cheerful baker who names her sourdough starters")
    page.get_by_role("button", name="Preview cost").click()
    preview = page.get_by_role("status", name="Cost preview")
    expect(preview).to_contain_text("tokens")
    expect(preview).to_contain_text("of the monthly generation quota")
    expect(preview).to_contain_text("Nothing was spent")
    shoot(page, screenshots, "persona-cost-preview")
    assert personas() == before


def test_the_playground_streams_a_reply_and_counts_it(page, http, tenants, screenshots):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    sign_in(page, tenant.api_key)
    page.goto(f"/dashboard#/playground/{persona_id}")
    page.get_by_role("button", name="New session").click()
    composer = page.get_by_label("Message")
    expect(composer).to_be_visible()
    # Every text the reply shows as it grows, to tell a stream from one answer.
    page.evaluate("""() => {
        window.seen = [];
        new MutationObserver(() => {
            const reply = [...document.querySelectorAll('.msg.assistant .content')].pop();
            if (reply && reply.textContent) window.seen.push(reply.textContent);
        }).observe(document.querySelector('.transcript'), {subtree: true, childList: true, characterData: true});
    }""")
    composer.fill("What are you listening to tonight?")
    page.get_by_role("button", name="Send").click()
    reply = page.locator(".msg.assistant").last
    expect(reply.locator(".meta")).to_contain_text("out ·")
    expect(page.locator('[data-counter="Messages"]')).to_have_text("2")
    # The sessions list shows the exchange just finished (from the reply's stored session), not the one before.
    current = page.locator(".session-list li").filter(has=page.locator('a[aria-current="page"]'))
    expect(current).to_contain_text("2 messages")
    final = reply.locator(".content").inner_text()
    seen = page.evaluate("window.seen")
    # The page drew the reply as its stream grew it, never replacing it. How many texts it drew apart depends on
    # how many events one network read brings (on a quiet machine the whole reply can come in one read and be
    # drawn once), so that count is not the test; that the reply is streamed as many events is
    # tests/chat/test_chat_http.py's test_streamed_reply.
    assert seen and all(final.startswith(s) for s in seen), seen

    sessions = http.get("/v1/chat/sessions", params={"personaId": persona_id}, headers=tenant.auth).json()["items"]
    (session,) = sessions
    assert page.locator('[data-counter="Output tokens"]').inner_text() == str(session["outputTokens"]) != "0"
    assert page.locator('[data-counter="Input tokens"]').inner_text() == str(session["inputTokens"])
    expect(page.locator('[data-counter="Cost"]')).to_have_text(re.compile(r"^\$0\.\d{6}$"))
    shoot(page, screenshots, "playground")

    # A reply that drifts from the persona's voice is withheld: a warning, the error and its request id.
    composer.fill("[[drift]] talk like someone else")
    page.get_by_role("button", name="Send").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("drift_blocked")
    expect(alert.locator(".request-id")).to_have_text(REQUEST_ID)
    expect(page.locator(".msg.assistant.failed .drift")).to_contain_text("Drift blocked")
    expect(page.locator('[data-counter="Messages"]')).to_have_text("2")
    shoot(page, screenshots, "playground-drift")

    # The audit log names a streamed message as it names one sent in one answer, and at
    # 1400 px its table fits: no column (Who) is scrolled or clipped out of view.
    page.set_viewport_size(WIDE)
    go(page, "Audit log")
    settled(page)
    log = page.get_by_role("region", name="Audit events")
    expect(log.get_by_role("row").filter(has_text="chat_session.send").first).to_be_visible()
    assert "send_chat_message" not in log.inner_text()
    assert page.evaluate("el => el.scrollWidth - el.clientWidth", log.element_handle()) <= 0
    right = log.bounding_box()["x"] + log.bounding_box()["width"]
    for who in log.locator('td[data-label="Who"]').all():
        assert who.bounding_box()["x"] + who.bounding_box()["width"] <= right
    shoot(page, screenshots, "audit-wide")


def test_chat_controls_regenerate_choose_edit_delete_and_preview(page, http, tenants, screenshots):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    sign_in(page, tenant.api_key)
    page.goto(f"/dashboard#/playground/{persona_id}")
    page.get_by_role("button", name="New session").click()
    composer = page.get_by_label("Message")
    composer.fill("What are you listening to tonight?")
    page.get_by_label("Max tokens").fill("9000")
    page.get_by_role("button", name="Preview cost").click()
    expect(page.get_by_role("alert")).to_contain_text("maxTokens")  # the field the bound names
    page.get_by_label("Max tokens").fill("5")
    page.get_by_label("Temperature").fill("0.7")
    page.get_by_role("button", name="Preview cost").click()
    expect(page.locator("[data-preview]")).to_contain_text(re.compile(r"Estimate: \d+ in · 5 out · \$0\.\d{6}"))
    expect(page.locator("[data-preview]")).to_contain_text("Nothing is spent")
    expect(page.locator('[data-counter="Messages"]')).to_have_text("0")
    page.get_by_role("button", name="Send").click()
    expect(page.locator('[data-counter="Messages"]')).to_have_text("2")
    last = page.locator(".msg.assistant").last
    expect(last.get_by_role("button", name="Regenerate")).to_be_visible()
    first_text = last.locator(".content").inner_text()
    (session,) = http.get("/v1/chat/sessions", params={"personaId": persona_id}, headers=tenant.auth).json()["items"]
    assert session["outputTokens"] <= 5

    # Regenerate: a second alternative, chosen; back to the first with the arrows.
    last.get_by_role("button", name="Regenerate").click()
    expect(page.locator(".msg.assistant").last.locator(".swipes")).to_have_text("2/2")
    expect(page.locator('[data-counter="Messages"]')).to_have_text("2")
    page.locator(".msg.assistant").last.get_by_role("button", name="Previous alternative").click()
    expect(page.locator(".msg.assistant").last.locator(".swipes")).to_have_text("1/2")
    expect(page.locator(".msg.assistant").last.locator(".content")).to_have_text(first_text)
    items = http.get(f"/v1/chat/sessions/{session['sessionId']}/messages", headers=tenant.auth).json()["items"]
    assert items[-1]["swipeIndex"] == 0 and items[-1]["swipeCount"] == 2
    shoot(page, screenshots, "playground-swipes")

    # Edit the user message: the reply after it goes; "Reply" answers the edited text.
    page.locator(".msg.user").first.get_by_role("button", name="Edit").click()
    page.get_by_label("Edited text").fill("Which record is on tonight?")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".msg")).to_have_count(1)
    expect(page.locator(".msg.user .meta")).to_contain_text("edited")
    expect(page.locator('[data-counter="Messages"]')).to_have_text("1")
    page.locator(".msg.user").get_by_role("button", name="Reply").click()
    expect(page.locator(".msg")).to_have_count(2)

    # Delete the reply (after a confirmation): the conversation is the user message alone.
    page.locator(".msg.assistant").get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(page.locator(".msg")).to_have_count(1)
    expect(page.locator('[data-counter="Messages"]')).to_have_text("1")


def test_the_usage_page_charts_usage_by_day_persona_and_key(page, http, tenants, screenshots):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    sid = http.post("/v1/chat/sessions", json={"personaId": persona_id}, headers=tenant.auth).json()["sessionId"]
    for line in ("Hello there.", "Tell me about the sea."):
        assert http.post(f"/v1/chat/sessions/{sid}/messages", json={"content": line}, headers=tenant.auth).status_code == 200
    usage = http.get("/v1/usage", headers=tenant.auth).json()
    sign_in(page, tenant.api_key)
    go(page, "Usage")
    panel = page.get_by_role("region", name="Usage over time")
    chart = panel.get_by_role("img")
    expect(chart).to_have_attribute("aria-label", re.compile(r"^Cost by UTC day, 30 days: \$0\.\d{6} in all$"))
    bars = chart.locator("rect.bar")
    expect(bars).to_have_count(30)
    today = usage["buckets"][-1]
    assert bars.last.get_attribute("data-day") == today["key"]
    assert bars.last.get_attribute("data-value") == str(today["costUsdMicros"]) != "0"
    expect(panel.locator("[data-usage-totals]")).to_contain_text("2 generations")
    panel.get_by_label("Show").select_option("generations")
    expect(chart.locator("rect.bar").last).to_have_attribute("data-value", "2")
    shoot(page, screenshots, "usage-chart")
    panel.get_by_label("Group by").select_option("persona")
    expect(panel.get_by_role("table")).to_contain_text(persona_id)
    expect(panel.get_by_role("img")).to_have_count(0)
    panel.get_by_label("Group by").select_option("key")
    expect(panel.get_by_role("table").locator("code")).to_have_text(re.compile(r"^key_"))


def test_a_session_without_a_title_fits_its_card(page, http, tenants):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    r = http.post("/v1/chat/sessions", json={"personaId": persona_id}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    session_id = r.json()["sessionId"]
    sign_in(page, tenant.api_key)
    page.goto(f"/dashboard#/playground/{persona_id}/{session_id}")
    card = page.locator(".sessions")
    link = card.get_by_role("link", name=session_id)
    expect(link).to_be_visible()
    # The id (no title to show instead) wraps inside the card rather than running past its edge.
    box = card.bounding_box()
    assert page.evaluate("el => el.scrollWidth - el.clientWidth", card.element_handle()) <= 0
    for part in page.evaluate("a => [...a.getClientRects()].map((r) => r.right)", link.element_handle()):
        assert part <= box["x"] + box["width"]


def test_a_webhook_endpoint_is_pinged_and_a_delivery_replayed(page, tenants, receiver, screenshots):
    tenant = tenants()
    receiver.routes["/dashboard-hook"] = lambda got: Answer(200, b'{"received": true}')
    sign_in(page, tenant.api_key)
    go(page, "Webhooks")
    page.get_by_label("URL").fill(receiver.url("/dashboard-hook"))
    page.get_by_label("Description").fill("dashboard test")
    page.get_by_role("button", name="Add endpoint").click()
    secret = page.locator(".secret-value")
    expect(secret).to_have_text(re.compile(r"^whsec_"))
    signing_secret = secret.inner_text()
    page.get_by_role("link", name="Open endpoint").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("whe_")

    page.get_by_role("button", name="Send test ping").click()
    deliveries = page.locator("li.delivery")
    expect(deliveries).to_have_count(1)
    expect(deliveries.first).to_have_attribute("data-status", "succeeded")
    first = deliveries.first.get_attribute("data-delivery")
    deliveries.first.locator("summary").click()
    expect(deliveries.first.locator(".attempts")).to_contain_text("HTTP 200")
    expect(deliveries.first.locator(".response-body")).to_have_text('{"received": true}')
    (ping,) = receiver.at("/dashboard-hook")
    assert ping.headers["x-service-event-type"] == "webhook.endpoint.test_ping"
    assert verify_signature(ping.body, ping.headers["x-service-signature"], [signing_secret])
    shoot(page, screenshots, "webhook-endpoint")

    deliveries.first.get_by_role("button", name="Replay").click()
    expect(deliveries).to_have_count(2)
    expect(page.get_by_role("status").filter(has_text=f"Replay of {first}")).to_be_visible()
    replayed = page.locator("li.delivery").filter(has_text=f"replay of {first}")
    expect(replayed).to_have_attribute("data-status", "succeeded")
    pings = receiver.at("/dashboard-hook")
    assert len(pings) == 2 and pings[0].event["id"] == pings[1].event["id"]

    page.get_by_role("button", name="Reveal secret").click()
    expect(page.locator(".secret-value")).to_have_text(signing_secret)
    page.get_by_text("Change subscribed events").click()
    subscribed = page.get_by_role("form", name="Subscribed events")
    subscribed.get_by_label("*", exact=True).uncheck()
    subscribed.get_by_label("persona.created").check()
    subscribed.get_by_role("button", name="Save events").click()
    expect(page.locator("dl")).to_contain_text("Eventspersona.created")
    shoot(page, screenshots, "webhook-deliveries")


def test_a_plan_change_invoices_and_its_pdf_opens(page, tenants, screenshots):
    tenant = tenants(plan="pro")
    sign_in(page, tenant.api_key)
    go(page, "Billing")
    expect(page.get_by_text("No invoices yet.")).to_be_visible()
    page.get_by_label("Plan", exact=True).select_option("team")
    page.get_by_role("button", name="Change plan").click()
    page.get_by_role("dialog").get_by_role("button", name="Change plan").click()
    expect(page.get_by_role("banner")).to_contain_text("team")
    invoice = page.get_by_role("row").filter(has_text="Proration")
    expect(invoice).to_contain_text("paid")
    shoot(page, screenshots, "billing")

    with page.context.expect_event("response", lambda r: "/v1/files/" in r.url) as pdf:
        invoice.get_by_role("button", name=re.compile("^PDF of invoice")).click()
    response = pdf.value
    assert response.status == 200 and response.header_value("content-type") == "application/pdf"
    # The tab shows it (its body is the viewer's now): the same signed URL, fetched again, is the PDF.
    assert page.context.request.get(response.url).body().startswith(b"%PDF")


def test_every_page_at_desktop_and_phone_width_and_by_keyboard(page, http, tenants, screenshots):
    tenant = tenants()
    make_persona(http, tenant)
    # Signed in with the keyboard alone: the credential field has the focus.
    page.goto("/dashboard")
    page.keyboard.type(tenant.api_key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    usage = page.get_by_role("navigation", name="Main").get_by_role("link", name="Usage")
    for _ in range(30):
        if page.evaluate("document.activeElement.textContent") == "Usage":
            break
        page.keyboard.press("Tab")
    expect(usage).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    expect(page.locator("#minute-meter")).to_be_attached()
    expect(page.get_by_role("region", name="Limits and quotas")).to_contain_text("generations_per_month")

    for label in PAGES:
        go(page, label)
        settled(page)
        shoot(page, screenshots, f"desktop-{label.lower().replace(' ', '-')}")

    page.set_viewport_size(PHONE)
    nav = page.get_by_role("navigation", name="Main")
    menu = page.get_by_role("button", name="Menu")
    for label in PAGES:
        expect(nav).to_be_hidden()
        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
        go(page, label)
        settled(page)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{label} is {overflow}px wider than a phone"
        shoot(page, screenshots, f"phone-{label.lower().replace(' ', '-')}")



def test_at_1280_px_tables_keep_words_whole_and_the_audit_log_pages(page, http, tenants, screenshots):
    tenant = tenants()
    # Keys with every scope (a wide Scopes column), half of them revoked: more audit events than a page holds.
    for n in range(18):
        r = http.post("/v1/keys", json={"name": f"deploy key {n}", "scopes": SCOPES}, headers=tenant.auth)
        assert r.status_code == 200, r.text
        if n % 2:
            r = http.post(f"/v1/keys/{r.json()['key']['id']}/revoke", headers=tenant.auth)
            assert r.status_code == 200, r.text
    events = http.get("/v1/audit/events", params={"limit": 100}, headers=tenant.auth).json()["items"]
    assert len(events) > 25
    missing: list[str] = []
    page.context.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.set_viewport_size(LAPTOP)
    sign_in(page, tenant.api_key)

    go(page, "API keys")
    settled(page)
    keys = page.get_by_role("region", name="API keys")
    expect(keys.locator("tbody tr")).to_have_count(19)
    reads_whole(page, keys)
    shoot(page, screenshots, "api-keys-1280")

    # The audit log: a page of events with its pager on the first screen; Next shows the next ones.
    go(page, "Audit log")
    settled(page)
    log = page.get_by_role("region", name="Audit events")
    rows = log.locator("tbody tr")
    expect(rows).to_have_count(25)
    top = page.get_by_role("navigation", name="Audit log pages (top)")
    expect(top).to_contain_text("Page 1")
    box = top.get_by_role("button", name="Next page").bounding_box()
    assert box["y"] + box["height"] <= LAPTOP["height"]
    assert page.evaluate("document.documentElement.scrollHeight") < 3 * LAPTOP["height"]
    reads_whole(page, log)
    shoot(page, screenshots, "audit-1280")
    request_ids = log.locator('td[data-label="Request"]')
    first = request_ids.all_inner_texts()
    assert first == [e["requestId"] for e in events[:25]]
    top.get_by_role("button", name="Next page").click()
    expect(top).to_contain_text("Page 2")
    expect(rows).to_have_count(len(events) - 25)
    assert request_ids.all_inner_texts() == [e["requestId"] for e in events[25:]]
    expect(top.get_by_role("button", name="Next page")).to_be_disabled()
    reads_whole(page, log)
    # Back from the pager under the table: page 1 again, its top pager in view.
    page.get_by_role("navigation", name="Audit log pages (bottom)").get_by_role("button", name="Previous page").click()
    expect(top).to_contain_text("Page 1")
    expect(request_ids).to_have_text(first)
    expect(top).to_be_in_viewport()

    # The dashboard and the API reference load nothing that is missing, their icons included.
    for path in ("/dashboard", "/docs"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        icon = page.context.request.get(page.evaluate(ICON))
        assert (icon.status, icon.headers["content-type"]) == (200, "image/svg+xml"), path
    assert missing == []
