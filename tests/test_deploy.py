"""deploy/: the compose file and the Kubernetes example describe the topology the replica test
runs (two replicas sharing Redis and a Chroma server), with configurations the proxy accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

from ctxwarden.proxy.config import load_settings, merge_config
from ctxwarden.proxy.workers import refusal

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def test_the_compose_replicas_share_redis_and_chroma_behind_one_balancer():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    replicas = [name for name, s in services.items() if "build" in s]
    assert len(replicas) == 2 and {"redis", "chroma", "lb"} <= set(services)
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert all(f"server {name}:8787" in nginx for name in replicas) and "proxy_buffering off" in nginx
    settings = load_settings(str(DEPLOY / "ctxwarden.yaml"))
    assert settings.state.redis_url == "redis://redis:6379/0" and settings.storage.chroma_url == "http://chroma:8000"
    assert refusal(settings, 2) is None  # what replicas share is what workers need


def test_the_kubernetes_example_runs_two_replicas_with_a_valid_config():
    docs = {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "ctxwarden.yaml").read_text())}
    deployment = docs["Deployment/ctxwarden"]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    embedded = yaml.safe_load(docs["ConfigMap/ctxwarden"]["data"]["ctxwarden.yaml"])
    settings = load_settings(None, merge_config({}, embedded))
    assert settings.state.redis_url.startswith("redis://ctxwarden-redis") and "Service/ctxwarden-chroma" in docs
