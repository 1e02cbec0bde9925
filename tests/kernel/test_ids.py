"""Resource ids (kernel/ids.py): a prefix and 24 characters, a letter then base 36, drawn from the OS CSPRNG
(issue 50: the cuid2 package's generator cost ~90 µs an id), the shape cuid2 gave and stored ids have."""

from __future__ import annotations

import re

from persona_service.kernel.ids import has_prefix, new_id, new_ids


def test_an_id_has_its_prefix_and_the_cuid2_shape_and_ids_do_not_repeat():
    ids = [new_id("event") for _ in range(2000)] + new_ids("audit_event", 2000)
    assert all(re.fullmatch(r"(evt|aud)_[a-z][0-9a-z]{23}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert has_prefix("event", ids[0]) and not has_prefix("audit_event", ids[0])
