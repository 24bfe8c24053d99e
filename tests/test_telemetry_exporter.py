"""`telemetry.exporter: otlp | console | none`: the console exporter through the real server
(`ctxwarden serve` in a subprocess, spans and metrics on its stderr), the defaults, and config
errors that name the key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ctxwarden.proxy.config import ConfigError, load_settings
from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.telemetry import Telemetry
from tests.conftest import policies_off


def serve(tmp_path: Path, fake, exporter: str) -> tuple[int, subprocess.Popen]:
    port = free_port()
    config = {"server": {"port": port}, "upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None},
              "storage": {"path": str(tmp_path / "s")}, "policies": policies_off(),
              "telemetry": {"exporter": exporter}}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen([sys.executable, "-m", "ctxwarden.proxy.cli", "serve", "--config", str(path),
                             "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return port, proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the server did not start: {proc.communicate()[1][-2000:]}")
        time.sleep(0.1)


def one_request_then_stop(tmp_path: Path, fake, exporter: str) -> tuple[str, str]:
    port, proc = serve(tmp_path, fake, exporter)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                       json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text
    finally:
        proc.send_signal(signal.SIGTERM)  # a clean shutdown flushes the span processor and the metric reader
        out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGTERM), err[-2000:]  # uvicorn re-raises the signal once it is done
    return out, err


def test_the_console_exporter_prints_spans_and_metrics_on_stderr(tmp_path, fake):
    out, err = one_request_then_stop(tmp_path, fake, "console")
    assert '"name": "POST /v1/chat/completions"' in err and '"kind": "SpanKind.SERVER"' in err
    assert '"name": "chat gpt-4o"' in err and '"gen_ai.provider.name": "openai"' in err
    assert '"name": "ctxwarden.request.duration_seconds"' in err and '"unit": "s"' in err  # the metrics too
    assert "POST /v1/chat/completions" not in out  # stdout stays clean


def test_no_exporter_prints_nothing(tmp_path, fake):
    _, err = one_request_then_stop(tmp_path, fake, "none")
    assert "POST /v1/chat/completions" not in err and "duration_seconds" not in err


def test_the_default_is_otlp_with_an_endpoint_else_none():
    assert load_settings().telemetry.exporter_in_use() == "none"
    with_endpoint = load_settings(overrides={"telemetry": {"otlp_endpoint": "http://collector:4318"}})
    assert with_endpoint.telemetry.exporter_in_use() == "otlp"
    assert Telemetry().exported is False and Telemetry().exporter == "none"
    console = Telemetry(exporter="console")
    assert console.exported is True and console.tracer.start_span("x").is_recording()
    console.shutdown()


@pytest.mark.parametrize("telemetry, problem", [
    ({"exporter": "otlp"}, "telemetry.exporter: Value error, otlp needs telemetry.otlp_endpoint"),
    ({"exporter": "stdout"}, "telemetry.exporter: Input should be 'otlp', 'console' or 'none'"),
    ({"otlp_endpoint": "collector:4318"}, "telemetry.otlp_endpoint: Value error, must be an http:// or https:// URL"),
])
def test_config_errors_name_the_key(telemetry, problem):
    with pytest.raises(ConfigError) as caught:
        load_settings(overrides={"telemetry": telemetry})
    assert problem in str(caught.value)
