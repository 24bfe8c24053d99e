"""Start the scale-out topology as local processes on 127.0.0.1: a Redis server, a Chroma server,
and `ctxwarden serve` replicas. The replica test and bench/replicas.py use it; deploy/compose.yaml
is the same topology in containers.

Each `Process` owns one child; `stop()` ends it (SIGTERM, then SIGKILL), and `kill()` is for tests of
failure behaviour (`pause()`/`resume()`: a hung one).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import yaml

from .local_server import free_port

DEFAULT_TIMEOUT_S = 60.0


class Process:
    def __init__(self, args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.port = port
        self.log = log
        self.env = env
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_mb(self) -> float:
        """The child's resident memory now (Linux), in MB."""
        return rss_mb(self.proc.pid) if self.proc is not None else float("nan")

    def start(self, ready: Callable[["Process"], bool], timeout_s: float = DEFAULT_TIMEOUT_S) -> "Process":
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **(self.env or {})})
        deadline = time.monotonic() + timeout_s
        while not _safely(ready, self):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"{' '.join(self.args[:3])} on port {self.port} did not start:\n{tail}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its port and connections but answers nothing (a hung server)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _safely(check: Callable[[Process], bool], process: Process) -> bool:
    try:
        return check(process)
    except Exception:
        return False


def http_ready(path: str) -> Callable[[Process], bool]:
    """Ready when GET <the process's URL><path> answers 200."""
    return lambda p: httpx.get(p.url + path, timeout=1.0).status_code == 200


def rss_mb(pid: int) -> float:
    kb = resident_kb(pid)
    return float("nan") if kb is None else kb / 1024


def resident_kb(pid: int | str) -> int | None:
    """A process's resident set (VmRSS, Linux) in kB; `pid` "self" is this one. None when the kernel
    shows none (a zombie); OSError when there is no such process or no /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def redis_command() -> str | None:
    return shutil.which("redis-server")


def start_redis(workdir: Path, port: int | None = None) -> Process:
    """A throwaway redis-server (no persistence) on 127.0.0.1."""
    import redis

    port = port or free_port()
    args = [redis_command() or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(workdir)]
    process = Process(args, port, workdir / f"redis-{port}.log")
    return process.start(lambda p: bool(redis.Redis(port=p.port, socket_timeout=1).ping()))


def start_chroma(workdir: Path, port: int | None = None) -> Process:
    """`chroma run` (shipped with the chromadb package) over a directory of its own."""
    port = port or free_port()
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    args = [chroma, "run", "--path", str(workdir / f"chroma-{port}"), "--host", "127.0.0.1", "--port", str(port)]
    return Process(args, port, workdir / f"chroma-{port}.log").start(http_ready("/api/v2/heartbeat"))


def start_replica(workdir: Path, config: dict[str, Any], port: int | None = None, env: dict[str, str] | None = None,
                  workers: int = 1, log_level: str = "warning") -> Process:
    """`ctxwarden serve --config <config as YAML>` on its own port; ready when /healthz answers."""
    port = port or free_port()
    path = workdir / f"replica-{port}.yaml"
    path.write_text(yaml.safe_dump({**config, "server": {**config.get("server", {}), "host": "127.0.0.1", "port": port}}))
    args = [sys.executable, "-m", "ctxwarden.proxy.cli", "serve", "--config", str(path), "--log-level", log_level,
            "--workers", str(workers)]
    return Process(args, port, workdir / f"replica-{port}.log", env).start(http_ready("/healthz"))
