"""A screenshot of the dashboard after a short scripted run: writes docs/dashboard.png.

    .venv/bin/python bench/dashboard_screenshot.py [--out docs/dashboard.png]

Starts the fake upstream and the proxy in process (temporary store), sends traffic through the
official openai SDK (three models, two tenants, long histories the history policy compacts,
answers the poisoning policy blocks, a clash the strategy settles, a tool-call loop the loops policy stops),
then signs in with Debian's chromium (playwright-python, executable_path) and takes the picture.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxwarden.proxy.app import create_app  # noqa: E402
from ctxwarden.proxy.config import load_settings  # noqa: E402
from ctxwarden.proxy.fake_upstream import FakeUpstream  # noqa: E402
from ctxwarden.proxy.local_server import LocalServer  # noqa: E402

KEY = "screenshot-admin-key"
FACTS = [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."},
         {"id": "inception", "text": "Inception is starring Leonardo DiCaprio."}]


def traffic(proxy: LocalServer, fake: FakeUpstream) -> None:
    import openai

    from ctxwarden.proxy.demo import _call

    httpx.post(f"{proxy.url}/admin/kb/documents", json={"documents": FACTS},
               headers={"authorization": f"Bearer {KEY}"}).raise_for_status()
    clients = {t: openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-demo", max_retries=0,
                                default_headers={"x-ctxwarden-tenant": t} if t else None) for t in ("acme", "globex", None)}
    models = ["gpt-4o", "gpt-4o-mini", "claude-3-5-sonnet"]
    for i in range(24):  # long histories on small windows: the history policy compacts them
        client = list(clients.values())[i % 3]
        history = [{"role": "user" if j % 2 == 0 else "assistant", "content": "lorem ipsum dolor sit amet " * 45}
                   for j in range(30 if i % 3 == 0 else 2)]
        client.chat.completions.create(model=models[i % 3], messages=[*history, {"role": "user", "content": f"go on {i}"}])
    wrong = [("Where is the Eiffel Tower?", "The Eiffel Tower is located in London."),
             ("Which city has the Eiffel Tower?", "The Eiffel Tower is located in Berlin."),
             ("Who stars in Inception?", "Inception is starring Tom Cruise."),
             ("Who is the lead actor of Inception?", "Inception is starring Brad Pitt.")]
    for question, answer in wrong:  # each its own conversation: blocked or quarantined
        fake.reply(content=answer)
        clients[None].chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": question}])
    fake.reply(content="Noted.")
    trip = [{"role": "user", "content": "We're 2 adults and I'm in Oslo."}, {"role": "assistant", "content": "Got it."},
            {"role": "user", "content": "I'm in Bergen now, find a hotel."}]
    clients["acme"].chat.completions.create(model="gpt-4o", messages=trip)  # a clash the strategy settles
    looping = [{"role": "user", "content": "Weather in Paris?"},
               *[m for i in range(3) for m in (_call(f"w{i}", "get_weather", {"city": "Paris"}),
                                               {"role": "tool", "tool_call_id": f"w{i}", "content": "error: timeout"})]]
    clients["globex"].chat.completions.create(model="gpt-4o", messages=looping)  # the loops policy stops it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "dashboard.png"))
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("no chromium on PATH (Debian: apt-get install -y chromium)")
    from playwright.sync_api import expect, sync_playwright

    os.environ["CTXWARDEN_ADMIN_KEY"] = KEY
    fake = FakeUpstream()
    upstream = LocalServer(fake.app()).start()
    with tempfile.TemporaryDirectory() as store:
        settings = load_settings(None, {
            "upstream": {"base_url": f"{upstream.url}/v1", "api_key_env": None, "retries": 0},
            "storage": {"path": store},
            "models": {"gpt-4o-mini": {"context_window": 4000}, "claude-3-5-sonnet": {"context_window": 4000}},
            "policies": {"poisoning": {"enabled": True, "confidence_threshold": 0.9, "quarantine_band": [0.5, 0.9],
                                       "alert_min_samples": 1}},
        })
        proxy = LocalServer(create_app(settings), settings=settings).start()
        try:
            traffic(proxy, fake)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 1500})
                page.goto(f"{proxy.url}/dashboard")
                page.fill("#key", KEY)
                page.click("button[type=submit]")
                page.wait_for_selector("body[data-loaded='1']")
                expect(page.get_by_test_id("requests-total")).not_to_have_text("0")
                page.screenshot(path=args.out, full_page=False)
                browser.close()
        finally:
            proxy.stop()
            upstream.stop()
    print(f"wrote {args.out} ({Path(args.out).stat().st_size // 1024} kB)")


if __name__ == "__main__":
    main()
