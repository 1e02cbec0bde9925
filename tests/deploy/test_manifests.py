"""The container image and the Kubernetes manifests, checked offline: every
manifest of the Kubernetes API validates against its schema (strict: no unknown
fields; the operator's PostgreSQL Cluster is checked for what the service relies
on, its schema not being part of Kubernetes'), PostgreSQL and Redis fail over
(a synchronous standby, Sentinels the service's URL follows), every container runs a real `persona-service` command, every
variable they set is a setting the service reads, and the Dockerfile copies
only what exists."""

from __future__ import annotations

import configparser
import pathlib
import re
import subprocess
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from persona_service.cli import kernel_commands, settings_sections
from persona_service.kernel.settings import env_names
from persona_service.registry import MODULES

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.30.0"


def _documents() -> list[tuple[str, dict]]:
    kustomization = yaml.safe_load((DEPLOY / "kubernetes" / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()):
            if doc:
                docs.append((f"{name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


DOCUMENTS = _documents()
# Custom resources, defined by an operator installed beforehand (postgres.yaml): not in Kubernetes' schema.
OPERATOR_GROUPS = {"postgresql.cnpg.io"}
KUBERNETES_DOCUMENTS = [(n, d) for n, d in DOCUMENTS if d["apiVersion"].split("/")[0] not in OPERATOR_GROUPS]


@pytest.mark.parametrize(("name", "doc"), KUBERNETES_DOCUMENTS, ids=[n for n, _ in KUBERNETES_DOCUMENTS])
def test_manifest_validates_against_the_kubernetes_schema(name, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_postgresql_fails_over_to_a_synchronous_standby_every_client_follows():
    """A commit is acknowledged once a standby has it, on another node, so a failover loses no acknowledged
    write; PgBouncer and the sessions of their own reach the operator's primary Service, whichever pod it is."""
    cluster = _doc("Cluster", "postgres")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = cluster["spec"]
    sync = spec["postgresql"]["synchronous"]
    assert sync["method"] in ("any", "first") and 1 <= sync["number"] < spec["instances"]
    assert sync["dataDurability"] == "required"  # "preferred" would acknowledge with no standby left
    assert spec["affinity"]["enablePodAntiAffinity"] and spec["affinity"]["podAntiAffinityType"] == "required"
    initdb = spec["bootstrap"]["initdb"]
    owner = _doc("Secret", initdb["secret"]["name"])
    assert owner["type"] == "kubernetes.io/basic-auth" and owner["stringData"]["username"] == initdb["owner"]
    primary = f"{cluster['metadata']['name']}-rw"  # the Service the operator points at the primary
    direct = urlsplit(_doc("Secret", "persona-service-direct")["stringData"]["DATABASE_URL"])
    assert (direct.hostname, direct.username, direct.path) == (primary, initdb["owner"], f"/{initdb['database']}")
    ini = configparser.ConfigParser()
    ini.read_string(_doc("ConfigMap", "pgbouncer")["data"]["pgbouncer.ini"])
    target = dict(pair.split("=", 1) for pair in ini["databases"]["persona"].split())
    assert (target["host"], target["dbname"]) == (primary, initdb["database"])


def test_redis_fails_over_through_sentinels_the_service_follows():
    """The service's REDIS_URL (parsed as the service parses it) asks the Sentinels' Service for the master they
    monitor; a majority of the pods' Sentinels must agree before one is promoted; the scripts are shell."""
    from persona_service.process.redis_pool import parse_sentinel

    url = parse_sentinel(_doc("Secret", "persona-service")["stringData"]["REDIS_URL"])
    [(host, port)] = url.sentinels
    [sentinel_port] = _doc("Service", "redis-sentinel")["spec"]["ports"]
    assert (host, port) == ("redis-sentinel", sentinel_port["port"])
    scripts = _doc("ConfigMap", "redis")["data"]
    [(service, quorum)] = re.findall(r"sentinel monitor (\S+) \S+ 6379 (\d+)", scripts["sentinel.sh"])
    assert re.findall(r"get-master-addr-by-name (\S+)", scripts["master.sh"]) == [url.service] == [service]
    pods = _doc("StatefulSet", "redis")["spec"]
    assert pods["replicas"] // 2 < int(quorum) <= pods["replicas"]
    assert pods["serviceName"] == "redis" and _doc("Service", "redis")["spec"]["clusterIP"] == "None"
    for name, script in scripts.items():
        checked = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
        assert checked.returncode == 0, (name, checked.stderr)


def test_the_manifests_cover_a_scaled_out_deployment():
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in DOCUMENTS}
    assert {("Deployment", "persona-server"), ("Deployment", "persona-stream-server"), ("Deployment", "persona-runner"),
            ("Deployment", "persona-worker"), ("Service", "persona-stream-server"),
            ("PodDisruptionBudget", "persona-stream-server"),
            ("Job", "persona-service-migrate"),
            ("HorizontalPodAutoscaler", "persona-server"), ("PodDisruptionBudget", "persona-server"),
            ("Service", "persona-service"), ("ConfigMap", "persona-service"), ("Secret", "persona-service")} <= kinds


def _containers(image: str | None = "persona-service"):
    """The containers of the service's image (`None`: every container, PgBouncer's too)."""
    for name, doc in DOCUMENTS:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec") if doc["kind"] in ("Deployment", "Job") else None
        for container in (pod or {}).get("containers", []):
            if image is None or container["image"] == image:
                yield name, container


def test_every_container_runs_a_real_command_as_non_root():
    commands = {c.name for c in (*kernel_commands(), *MODULES.commands)}
    roles = set()
    for name, container in _containers():
        assert container["args"][0] in commands, (name, container["args"])
        roles.add(container["args"][0])
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
    assert roles == {"serve", "runner", "edge", "worker", "migrate"}


def test_the_server_pod_is_probed_through_its_edge():
    server = next(doc for _, doc in DOCUMENTS if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "persona-server")
    edge = next(c for c in server["spec"]["template"]["spec"]["containers"] if c["name"] == "edge")
    assert edge["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert edge["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_every_variable_set_is_a_setting():
    from persona_service.process.runner import READY_FILE_ENV

    known = {name for section in settings_sections() for name in env_names(section)}
    for _, doc in DOCUMENTS:
        if doc["kind"] in ("ConfigMap", "Secret") and doc["metadata"]["name"].startswith("persona-service"):
            for variable in {**doc.get("data", {}), **doc.get("stringData", {})}:
                assert variable in known, variable
    for name, container in _containers():
        for variable in container.get("env", []):
            assert variable["name"] in known | {READY_FILE_ENV}, (name, variable["name"])


def test_the_dockerfile_copies_what_exists_and_runs_as_non_root():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    sources = [s for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.M) for s in line.split()[:-1]]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
    assert re.search(r"^USER 10001", dockerfile, re.M)
    assert dockerfile.count("FROM ") >= 2  # multi-stage


def test_the_edge_role_renders_a_configuration_envoy_accepts(tmp_path):
    import subprocess
    import sys

    cli = pathlib.Path(sys.executable).parent / "persona-service"
    env = {"PATH": "/usr/bin:/bin", "PERSONA_DATA_DIR": str(tmp_path), "PERSONA_EDGE_SECRET": "shared",
           "PERSONA_HTTP_HOST": "0.0.0.0", "HOME": str(tmp_path)}
    result = subprocess.run([str(cli), "edge", "--check"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout
    refused = subprocess.run([str(cli), "edge", "--check"], env={**env, "PERSONA_EDGE_SECRET": ""},
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "PERSONA_EDGE_SECRET" in refused.stderr
    # As the server pod's edge runs it: streams to the stream servers, found by DNS.
    server_pod = _doc("Deployment", "persona-server")["spec"]["template"]["spec"]
    edge = next(c for c in server_pod["containers"] if c["name"] == "edge")
    streams = {"PERSONA_EDGE_STREAM_SERVERS": _env(edge)["PERSONA_EDGE_STREAM_SERVERS"]}
    result = subprocess.run([str(cli), "edge", "--check"], env={**env, **streams}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    config = (tmp_path / "envoy.yaml").read_text()
    assert "type: STRICT_DNS" in config and '"persona-stream-server", port_value: 51051' in config


def _doc(kind: str, name: str) -> dict:
    return next(doc for _, doc in DOCUMENTS if doc["kind"] == kind and doc["metadata"]["name"] == name)


def test_the_manifests_match_the_tested_topology():
    """What scripts/topology.py ran (tests/topology): servers through PgBouncer in transaction
    mode, the migrations and workers straight to PostgreSQL, and a drain that fits the pod's
    grace period: /readyz fails for longer than the probe takes to notice, the edge outlives
    the server's drain, and the kubelet waits for drain, calls in flight and runs."""
    config = _doc("ConfigMap", "persona-service")["data"]
    drain, grace = float(config["PERSONA_DRAIN_SECONDS"]), float(config["PERSONA_SHUTDOWN_GRACE_SECONDS"])
    pod = _doc("Deployment", "persona-server")["spec"]["template"]["spec"]
    edge = next(c for c in pod["containers"] if c["name"] == "edge")
    probe = edge["readinessProbe"]
    assert drain > probe["periodSeconds"] * probe["failureThreshold"]
    assert float(edge["lifecycle"]["preStop"]["exec"]["command"][1]) >= drain + grace
    assert pod["terminationGracePeriodSeconds"] >= drain + grace + 5 + 5  # runs finish within 5 s (Runs.close)

    pooled = _doc("Secret", "persona-service")["stringData"]["DATABASE_URL"]
    direct = _doc("Secret", "persona-service-direct")["stringData"]["DATABASE_URL"]
    assert "@pgbouncer:" in pooled and "@pgbouncer:" not in direct
    for kind, name in (("Job", "persona-service-migrate"), ("Deployment", "persona-worker"),
                       ("Deployment", "persona-runner")):
        (container,) = _doc(kind, name)["spec"]["template"]["spec"]["containers"]
        assert container["envFrom"][-1] == {"secretRef": {"name": "persona-service-direct"}}, name
    ini = _doc("ConfigMap", "pgbouncer")["data"]["pgbouncer.ini"]
    assert "pool_mode = transaction" in ini
    assert ("max_prepared_statements" in ini) == (config["PERSONA_DB_PREPARED_STATEMENTS"] == "true")


def test_a_runner_rollout_keeps_a_runner_taking_model_calls():
    """The runner Deployment rolls as the topology's rolling restart does (tests/topology): a new runner is
    ready only once it takes model calls (the file the runner writes then), and no old one stops before."""
    from persona_service.process.runner import READY_FILE_ENV

    deployment = _doc("Deployment", "persona-runner")["spec"]
    (container,) = deployment["template"]["spec"]["containers"]
    ready_file = next(e["value"] for e in container["env"] if e["name"] == READY_FILE_ENV)
    assert container["readinessProbe"]["exec"]["command"] == ["test", "-f", ready_file]
    assert ready_file.startswith(container["volumeMounts"][0]["mountPath"] + "/")  # writable (read-only root)
    assert deployment["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def _env(container: dict) -> dict[str, str]:
    """A container's environment as the service reads it: its own `env` over the ConfigMap's."""
    return {**_doc("ConfigMap", "persona-service")["data"], **{e["name"]: e["value"] for e in container.get("env", [])}}


def test_streams_have_a_deployment_of_their_own_as_in_the_topology():
    """As scripts/topology.py runs it (tests/topology: rolling restart and node loss lose no stream):
    stream servers are `serve` pods apart from the servers, every server pod's edge sends its streams to
    them (by the headless Service's name, on the port where a server process serves streams), probed on
    that port's gRPC health, draining past the probe, within the pod's grace period."""
    from persona_service.kernel.settings import Settings

    pod = _doc("Deployment", "persona-stream-server")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = _env(container)
    assert container["args"] == ["serve"] and env["PERSONA_GRPC_HOST"] == "0.0.0.0"
    defaults = Settings.model_fields
    stream_port = int(env["PERSONA_GRPC_PORT"]) + int(env.get("PERSONA_STREAM_PORT_OFFSET",
                                                              defaults["stream_port_offset"].default))
    assert [p["containerPort"] for p in container["ports"]] == [stream_port]
    service = _doc("Service", "persona-stream-server")["spec"]
    assert service["clusterIP"] == "None"  # one address per pod, each health-checked by the edges
    assert service["selector"] == _doc("Deployment", "persona-stream-server")["spec"]["selector"]["matchLabels"]
    (port,) = service["ports"]
    server_pod = _doc("Deployment", "persona-server")["spec"]["template"]["spec"]
    edge = next(c for c in server_pod["containers"] if c["name"] == "edge")
    assert _env(edge)["PERSONA_EDGE_STREAM_SERVERS"] == f"persona-stream-server:{port['port']}"
    assert port["port"] == stream_port
    ingress = _doc("NetworkPolicy", "persona-stream-server")["spec"]["ingress"]
    assert [p["port"] for rule in ingress for p in rule["ports"]] == [stream_port]

    drain, grace = float(env["PERSONA_DRAIN_SECONDS"]), float(env["PERSONA_SHUTDOWN_GRACE_SECONDS"])
    probe = container["readinessProbe"]
    assert probe["grpc"]["port"] == stream_port == container["livenessProbe"]["grpc"]["port"]
    assert drain > probe["periodSeconds"] * probe["failureThreshold"]
    assert pod["terminationGracePeriodSeconds"] >= drain + grace + 5
    assert _doc("Deployment", "persona-stream-server")["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
