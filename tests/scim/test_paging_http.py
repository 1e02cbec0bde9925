"""SCIM pages by `startIndex` (an offset), and Okta's import walks every
page of /Users that way. The page that follows one a client was just given
continues after that page's last row (a keyset, the row's key kept a few
minutes in Redis): deep pages cost what the first does, and a walk neither
skips nor repeats users when others are deleted or created meanwhile, where
the OFFSET would skip one for each deleted before it. Any other startIndex,
and any sortBy, is the OFFSET."""

from __future__ import annotations

import uuid

from scim_client import BASE


def _page(scim, start: int, count: int, **params) -> dict:
    r = scim.http.get(BASE + "/Users", params={"startIndex": start, "count": count, **params},
                      headers={"Authorization": f"Bearer {scim.token}"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["startIndex"] == start
    return body


def _names(body: dict) -> list[str]:
    return [u["userName"] for u in body.get("Resources", [])]


def test_a_walk_by_start_index_neither_skips_nor_repeats_while_users_come_and_go(scim):
    tag = uuid.uuid4().hex[:8]
    made = [scim.user(f"walk{i}-{tag}@example.com") for i in range(7)]
    names = [u["userName"] for u in made]
    walked = _names(_page(scim, 1, 2)) + _names(_page(scim, 3, 2))
    assert walked == names[:4]
    # One the client has seen leaves; the OFFSET at 5 would now start at names[5], skipping names[4].
    assert scim.call("DELETE", f"/Users/{made[0]['id']}").status_code == 204
    late = scim.user(f"walk7-{tag}@example.com")  # created meanwhile: at the end, found by the walk
    page = _page(scim, 5, 2)
    assert page["totalResults"] == 7
    walked += _names(page) + _names(_page(scim, 7, 2))
    assert walked == [*names, late["userName"]]

    # A startIndex no client was just given the page before: the OFFSET, the rows at that position now.
    assert _names(_page(scim, 2, 2)) == names[2:4]
    # Another filter (or a sortBy) is another walk: the hint above is not its position.
    assert _names(_page(scim, 5, 2, filter='userName sw "walk"')) == [names[5], names[6]]
    assert _names(_page(scim, 5, 2, sortBy="userName")) == sorted([*names[1:], late["userName"]])[4:6]
