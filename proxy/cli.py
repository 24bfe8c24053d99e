"""The `ctxwarden` command: serve, check-config, demo, kb, memory, stats, keys."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

# One BLAS thread (before numpy loads): the proxy's matrix products are small, and BLAS threads
# spinning after each one on a busy machine made the evidence search 4x slower. Set it to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .config import ConfigError, load_settings  # noqa: E402


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import create_app
    from .server import uvicorn_config

    overrides: dict = {"server": {}}
    if args.host:
        overrides["server"]["host"] = args.host
    if args.port is not None:
        overrides["server"]["port"] = args.port
    settings = load_settings(args.config, overrides)
    if args.workers > 1:
        from .workers import refusal

        reason = refusal(settings, args.workers)
        if reason:
            print(f"ctxwarden: {reason}", file=sys.stderr)
            return 2
    print(
        f"ctxwarden listening on http://{settings.server.host}:{settings.server.port}/v1 "
        f"→ {settings.upstream.base_url} (config: {settings.source}; {args.workers} worker(s))",
        file=sys.stderr,
    )
    # A shutdown waits at most this long for open responses (long streams, dashboard live updates).
    log_args = {"log_level": args.log_level, "access_log": args.log_level == "debug", "timeout_graceful_shutdown": 10}
    if args.workers > 1:
        from .workers import serve_workers

        return serve_workers(args.config, overrides, settings, args.workers, **log_args)
    server = uvicorn.Server(uvicorn_config(create_app(settings), settings, **log_args))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    return 0 if server.started else 1


def _check(args: argparse.Namespace) -> int:
    settings = load_settings(args.file)
    enabled = [name for name, cfg in settings.policy_configs().items() if getattr(cfg, "enabled", True)]
    print(f"{args.file}: OK (upstream {settings.upstream.base_url}; policies: {', '.join(enabled) or 'none'})")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxwarden", description="OpenAI-compatible proxy that does context engineering for agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="YAML file merged over the embedded default")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--workers", type=int, default=1,
                       help="processes sharing the port; above 1 only while no policy keeps per-process state")
    serve.set_defaults(func=_serve)

    check = sub.add_parser("check-config", help="validate a config file without starting")
    check.add_argument("file")
    check.set_defaults(func=_check)

    demo = sub.add_parser("demo", help="a scripted conversation through the proxy against a local fake upstream")
    demo.set_defaults(func=_demo)

    try:
        from .kb_cli import add_kb_commands
    except ImportError:  # the knowledge-base commands come with the poisoning policy
        add_kb_commands = None
    if add_kb_commands:
        add_kb_commands(sub)
    from .keys_cli import add_keys_commands
    from .memory_cli import add_memory_commands
    from .stats_cli import add_stats_command

    add_stats_command(sub)
    add_memory_commands(sub)
    add_keys_commands(sub)
    return parser


def configure_logging(level_name: str) -> None:
    level = getattr(logging, level_name.upper(), logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpx logs every upstream request at INFO: a line per request on the hot path.
    logging.getLogger("httpx").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(getattr(args, "log_level", "info"))
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"ctxwarden: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
