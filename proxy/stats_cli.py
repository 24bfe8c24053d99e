"""`ctxwarden stats`: the dashboard's figures in the terminal, from a running server's /admin/stats."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .admin_client import call_admin
from .config import ConfigError, load_settings


def add_stats_command(subparsers: Any) -> None:
    stats = subparsers.add_parser("stats", help="the dashboard's figures from a running server, in the terminal")
    stats.add_argument("--config", help="the server's config (its host, port and admin key variable)")
    stats.add_argument("--server", help="host:port or URL of the server (default: the config's)")
    stats.add_argument("--window", choices=["1h", "1d", "1w"], default="1h")
    stats.set_defaults(func=_stats)


def _stats(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"ctxwarden stats: {exc}", file=sys.stderr)
        return 2
    code, stats, url = call_admin("stats", settings, args.server, "GET", "/admin/stats",
                                  params={"window": args.window}, timeout=30)
    if code:
        return code
    print(render(stats, args.window, url))
    return 0


def render(stats: dict[str, Any], window: str, url: str) -> str:
    """The figures the page shows, as lines of text."""
    requests, tokens, poisoning = stats.get("requests", {}), stats.get("tokens", {}), stats.get("poisoning", {})
    received = tokens.get("received", 0) or 0
    saved = tokens.get("saved", 0) or 0
    lines = [
        f"ctxwarden at {url}, last {window}   breaker: {stats.get('breaker', '?')}",
        f"  requests        {requests.get('total', 0):>10,.0f}   ({requests.get('per_minute', 0):.2f} / min)",
        f"  tokens received {received:>10,.0f}   forwarded {tokens.get('forwarded', 0):,.0f}   "
        f"saved {saved:,.0f} ({saved / received * 100 if received else 0:.1f} %)"
        + (f", ${stats['cost_saved_usd']:,.2f}" if stats.get("cost_saved_usd") is not None else ""),
        f"  poisoning       {poisoning.get('checked', 0):>10,.0f} checked, {poisoning.get('blocked', 0):,.0f} blocked, "
        f"{poisoning.get('quarantined', 0):,.0f} quarantined" + ("   ALERT: blocked rate over alert_rate" if poisoning.get("alert") else ""),
        f"  clashes         {stats.get('clashes', {}).get('total', 0):>10,.0f}   loops stopped {stats.get('loops', {}).get('stopped', 0):,.0f}",
        f"  quarantine      {len(stats.get('quarantine', {}).get('pending', [])):>10} pending",
    ]
    memory = stats.get("memory") or {}
    if memory.get("resident_bytes") is not None:  # the answering process's, as the dashboard's badge
        lines.append(f"  memory          {memory['resident_bytes'] / 2**20:>10,.0f} MB resident   caches "
                     f"{memory.get('cache_bytes', 0) / 2**20:,.0f} of {memory.get('cache_budget_bytes', 0) / 2**20:,.0f} MB")
    for title, table in (("by model", requests.get("by_model", {})), ("by tenant", requests.get("by_tenant", {})),
                         ("actions", stats.get("actions", {}).get("total", {}))):
        if table:
            lines.append(f"  {title}: " + ", ".join(f"{name} {count:,.0f}" for name, count in list(table.items())[:8]))
    return "\n".join(lines)
