"""A server process told to stop (SIGTERM) drains (kernel/server.drain):
/readyz fails at once, so a balancer (Kubernetes' readiness probe, through
the pod's own edge) takes it out of rotation, while the calls that still
reach it are served until PERSONA_DRAIN_SECONDS have passed."""

from __future__ import annotations

import signal
import time

from support import client_for, make_stack_beside, running


def test_a_draining_server_fails_readiness_and_still_serves(stack, tenant, tmp_path):
    beside = make_stack_beside(stack, tmp_path / "beside", PERSONA_DRAIN_SECONDS="6", PERSONA_SHUTDOWN_GRACE_SECONDS="1")
    with running(beside), client_for(beside) as http:
        assert http.get("/readyz").status_code == 200
        server = beside.process(f"server-{beside.grpc_ports[0]}")
        assert server is not None
        server.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while (ready := http.get("/readyz")).status_code == 200:
            assert time.monotonic() < deadline, "readiness still passes while draining"
            time.sleep(0.1)
        assert ready.status_code == 503, ready.text
        assert "draining" in ready.json()["error"]["details"]["checks"], ready.text
        for _ in range(5):  # the pod's edge still routes to it, and it answers
            r = http.get("/v1/personas", headers=tenant.auth)
            assert r.status_code == 200, r.text
            time.sleep(0.5)
        assert server.poll() is None
