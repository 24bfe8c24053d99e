"""Benchmark plumbing: start the fake upstream and the proxy as separate processes."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxwarden.proxy.local_server import free_port  # noqa: E402
from ctxwarden.proxy.processes import Process, http_ready, start_replica  # noqa: E402

LOGS = Path(tempfile.mkdtemp(prefix="ctxw-bench-logs-"))  # each child's output, to read when one fails


def launch(args: list[str], port: int, ready_path: str, env: dict | None = None, timeout_s: float = 60) -> Process:
    """Start `args` as a child listening on `port`; return once GET <port><ready_path> answers 200."""
    return Process(args, port, LOGS / f"{Path(args[0]).name}-{port}.log", env).start(http_ready(ready_path), timeout_s)


def start_fake() -> tuple[Process, str]:
    port = free_port()
    fake = launch([sys.executable, "-m", "ctxwarden.proxy.fake_upstream", "--port", str(port)], port, "/v1/models")
    return fake, fake.url


def start_floor(script: str, upstream_url: str) -> tuple[Process, str]:
    """One of the pass-through floors in bench/floors/ (the same stack as ctxwarden, or aiohttp)."""
    port = free_port()
    floor = launch([sys.executable, str(ROOT / "bench" / "floors" / script), "--upstream", f"{upstream_url}/v1",
                    "--port", str(port)], port, "/healthz")
    return floor, floor.url


def litellm_command() -> list[str] | None:
    """LiteLLM Proxy's command when it is installed (here or in the environment CTXW_LITELLM names)."""
    import shutil

    found = os.environ.get("CTXW_LITELLM") or shutil.which("litellm")
    if not found:
        return None
    probe = subprocess.run([found, "--help"], capture_output=True, text=True, timeout=120)
    return [found] if probe.returncode == 0 and "--config" in probe.stdout else None


def start_litellm(upstream_url: str) -> tuple[Process, str] | None:
    """LiteLLM Proxy (one worker) in front of the same upstream, or None when it is not installed."""
    command = litellm_command()
    if command is None:
        return None
    port = free_port()
    path = Path(tempfile.mkdtemp(prefix="ctxw-litellm-")) / "litellm.yaml"
    path.write_text(yaml.safe_dump({
        "model_list": [{"model_name": "gpt-4o", "litellm_params": {
            "model": "openai/gpt-4o", "api_base": f"{upstream_url}/v1", "api_key": "sk-bench"}}],
        "litellm_settings": {"telemetry": False},
        "general_settings": {"dangerously_permit_weak_or_unset_master_key": True}}))
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    proc = launch([*command, "--config", str(path), "--port", str(port), "--num_workers", "1"], port,
                  "/health/liveliness", env=env)
    return proc, f"http://127.0.0.1:{port}"


def start_proxy(upstream_url: str, config: dict, workers: int = 1) -> tuple[Process, str]:
    store = tempfile.mkdtemp(prefix="ctxw-bench-")
    # config's `upstream` keys (e.g. `anthropic`) are added to the fake's, not put in its place.
    upstream = {"base_url": f"{upstream_url}/v1", "api_key_env": None, **config.get("upstream", {})}
    merged = {**config, "storage": {"path": store, **config.get("storage", {})}, "upstream": upstream}
    # As in the Docker image: two malloc arenas keep RSS close to the live heap with worker threads.
    arenas = os.environ.get("MALLOC_ARENA_MAX", "2")  # set it to try another count
    proc = start_replica(Path(store), merged, env={"MALLOC_ARENA_MAX": arenas}, workers=workers, log_level="error")
    return proc, proc.url


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}  p95 {pct(values, 95):.3f}  p99 {pct(values, 99):.3f}"
