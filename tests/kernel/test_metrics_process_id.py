"""The request path's metrics in multiprocess mode ask the kernel for no process id per request (issue 50: 3
`getpid` calls a request), and a forked process still writes its own files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_a_request_observed_asks_for_no_process_id_and_a_fork_writes_its_own_files(tmp_path):
    script = textwrap.dedent("""
        import os, sys
        from persona_service.kernel import metrics
        parent = os.getpid()
        metrics.observe_request("/persona.v1.PersonaService/GetPersona", 200, "", 0.001)  # label sets made
        asked = []
        sys.setprofile(lambda frame, event, arg: asked.append(1) if event == "c_call" and arg is os.getpid else None)
        metrics.observe_request("/persona.v1.PersonaService/GetPersona", 200, "", 0.001)
        sys.setprofile(None)
        assert not asked, f"{len(asked)} getpid calls for one request"
        child = os.fork()
        if child == 0:
            metrics.observe_request("/persona.v1.PersonaService/GetPersona", 200, "", 0.001)
            os._exit(0)
        os.waitpid(child, 0)
        print(parent, child)
    """)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    parent, child = done.stdout.split()
    written = {path.name for path in tmp_path.iterdir()}
    assert {f"counter_{parent}.db", f"counter_{child}.db"} <= written, written
