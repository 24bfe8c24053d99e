"""The request path's cost decisions: inline vs worker thread, the upstream client, Server-Timing,
and `serve --workers`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ctxwarden.policies.base import HEAVY_BODY_BYTES, Exchange, run_cpu
from ctxwarden.proxy.config import UpstreamConfig
from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.upstream.client import Upstream

from .conftest import openai_client, policies_off

HI = [{"role": "user", "content": "hi"}]


async def test_light_work_runs_on_the_event_loop_and_heavy_work_in_a_thread():
    loop_thread = threading.get_ident()
    assert await run_cpu(False, threading.get_ident) == loop_thread
    assert await run_cpu(True, threading.get_ident) != loop_thread


def test_a_request_is_heavy_by_the_size_of_its_body():
    def ex(size: int) -> Exchange:
        return Exchange("r", "m", list(HI), None, {"model": "m", "messages": HI}, body_bytes=size)

    assert not ex(2_000).heavy
    assert ex(HEAVY_BODY_BYTES + 1).heavy


async def test_the_upstream_client_is_aiohttp_unless_configured(fake):
    default = Upstream(UpstreamConfig(base_url=f"{fake.url}/v1", api_key_env=None))
    plain = Upstream(UpstreamConfig(base_url=f"{fake.url}/v1", api_key_env=None, http_client="httpx"))
    try:
        assert default.native is not None and plain.native is None
        assert type(plain.client._transport).__name__ == "AsyncHTTPTransport"
        for up in (default, plain):  # both reach the same upstream with the same bytes
            result = await up.send("POST", "chat/completions", b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
                                   {"content-type": "application/json"})
            assert result.response.status_code == 200
            assert result.response.json()["choices"][0]["message"]["content"]
        assert [r["messages"][0]["content"] for r in fake.chat_requests[-2:]] == ["hi", "hi"]
    finally:
        await default.aclose()
        await plain.aclose()


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
def test_both_upstream_clients_stream_through_the_real_server(start_proxy, fake, client):
    proxy = start_proxy({"upstream": {"http_client": client}})
    fake.reply(content="one two three")
    chunks = list(openai_client(proxy).chat.completions.create(model="gpt-4o", messages=HI, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"


def test_server_timing_reports_what_the_request_policies_took(start_proxy):
    proxy = start_proxy()
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    name, _, duration = response.headers["server-timing"].partition(";dur=")
    assert response.status_code == 200 and name == "ctxwarden-policies" and float(duration) >= 0


# ---------------------------------------------------------------------- serve --workers

def _serve(tmp_path: Path, config: dict, workers: int) -> subprocess.Popen:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.Popen([sys.executable, "-m", "ctxwarden.proxy.cli", "serve", "--config", str(path),
                             "--workers", str(workers), "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def test_workers_are_refused_while_a_policy_keeps_per_process_state(tmp_path, fake):
    proc = _serve(tmp_path, {"upstream": {"base_url": f"{fake.url}/v1"}, "storage": {"path": str(tmp_path / "s")}}, 2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--workers 2 refused" in err and "loops" in err and "poisoning" in err


def _requests_total(text: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("ctxwarden_requests_total{"))


def test_two_workers_serve_the_pure_gateway(tmp_path, fake):
    port = free_port()
    config = {"server": {"port": port}, "upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None},
              "storage": {"path": str(tmp_path / "s")}, "budget": {"enabled": False}, "policies": policies_off()}
    proc = _serve(tmp_path, config, 2)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "slow"
            time.sleep(0.2)
        answers = [httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI},
                              timeout=10) for _ in range(6)]  # a new connection each: spread over the workers
        assert all(a.status_code == 200 and a.json()["choices"][0]["message"]["content"] for a in answers)
        deadline = time.monotonic() + 20
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_children(proc.pid)) >= 2  # the supervisor's worker processes (and its resource tracker)
        # /metrics is the whole server's, whichever worker answers the scrape (each writes a snapshot a second)
        time.sleep(2.5)
        for _ in range(6):  # a new connection each: the scrapes land on either worker
            scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10, headers={"connection": "close"}).text
            assert _requests_total(scrape) == 6, scrape[:2000]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
