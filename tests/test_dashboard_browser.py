"""The dashboard in a real headless Chromium (Debian's `chromium`, driven by playwright-python
with `executable_path`; `playwright install` is never needed): login, live figures after SDK
traffic, charts without console errors, and approving a quarantined answer from the page."""

from __future__ import annotations

import re
import shutil

import httpx
import pytest

from tests.conftest import openai_client, policies_off
from tests.test_dashboard import compressed_traffic, pressure_config

ADMIN_KEY = "dash-browser-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright-python is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y chromium)")
FACTS = [{"id": "inception", "text": "Inception is starring Leonardo DiCaprio."}]
CAUTIOUS = {"enabled": True, "add_approved_to_kb": True, "confidence_threshold": 1.0, "quarantine_band": [0.5, 1.0]}


@pytest.fixture(autouse=True)
def admin_key(monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)


@pytest.fixture
def browser():
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def signed_in_page(browser, proxy, without_stream=False):
    """A page signed in through the login form, collecting console errors and failed requests.
    `without_stream`: GET /admin/stats/stream answers 503 (a proxy in between that breaks SSE)."""
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    if without_stream:
        page.route("**/admin/stats/stream*", lambda route: route.fulfill(status=503, body="no streams here"))
    first = page.goto(f"{proxy.url}/dashboard")
    assert first.status == 401 and page.get_by_test_id("requests-total").count() == 0  # the login form, no data
    page.errors = []  # from here on (the 401 above is logged as a console error by design)
    page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and page.errors.append(f"{r.status} {r.url}"))  # names what failed
    page.fill("#key", ADMIN_KEY)
    page.click("button[type=submit]")
    page.wait_for_selector("body[data-loaded='1']")
    return page


def test_requests_total_and_charts_render_without_console_errors(fake, start_proxy, browser):
    proxy = start_proxy({"policies": policies_off()})
    client = openai_client(proxy)
    n = 7
    for i in range(n):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"hello {i}"}])
    page = signed_in_page(browser, proxy)
    assert page.get_by_test_id("requests-total").inner_text() == str(n)
    assert int(page.get_by_test_id("tokens-saved").inner_text()) == 0  # no budget pressure: nothing saved
    assert page.get_by_test_id("cost-saved").inner_text() == "$0"
    for chart in ("requests-chart", "tokens-chart", "actions-chart", "poisoning-chart"):
        assert page.locator(f"[data-testid={chart}] svg polyline").count() >= 1, chart
    assert page.locator("#recent tr").count() == n
    assert re.fullmatch(r"memory: [1-9]\d* MB · caches \d+ of 128 MB", page.get_by_test_id("memory").inner_text())
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "one more"}])
    sync_api.expect(page.locator("body")).to_have_attribute("data-live", "stream")
    sync_api.expect(page.get_by_test_id("requests-total")).to_have_text("8", timeout=5_000)  # streamed, ≤ 5 s
    page.click("#windows button[data-window='1w']")
    sync_api.expect(page.locator("#status")).to_contain_text("updated")
    assert page.get_by_test_id("requests-total").inner_text() == "8"
    cookie = next(c for c in page.context.cookies() if c["name"] == "ctxwarden_dashboard")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert page.errors == [], page.errors


def test_a_quarantined_answer_is_approved_from_the_page(fake, start_proxy, browser):
    policies = policies_off("poisoning")
    policies["poisoning"] = CAUTIOUS
    proxy = start_proxy({"policies": policies})
    r = httpx.post(f"{proxy.url}/admin/kb/documents", json={"documents": FACTS}, headers=AUTH)
    assert r.status_code == 200, r.text
    fake.reply(content="Inception is starring Tom Cruise.")
    held = openai_client(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Cast?"}])
    qid = held.choices[0].message.content.split("quarantine id ")[1].split(")")[0]

    page = signed_in_page(browser, proxy)
    items = page.get_by_test_id("quarantine-list").locator("[data-testid=quarantine-item]")
    assert items.count() == 1
    item = items.first
    assert item.get_attribute("data-id") == qid
    assert "Tom Cruise" in item.inner_text() and "Leonardo DiCaprio" in item.inner_text()  # claim and KB evidence
    item.get_by_test_id("approve").click()
    sync_api.expect(items).to_have_count(0, timeout=10_000)
    approved = httpx.get(f"{proxy.url}/admin/quarantine/{qid}", headers=AUTH).json()
    assert approved["status"] == "approved" and approved["note"] == "dashboard"
    stats = httpx.get(f"{proxy.url}/admin/stats", headers=AUTH).json()
    assert stats["poisoning"]["quarantined"] == 1 and stats["poisoning"]["checked"] == 1
    assert stats["actions"]["total"]["poisoning.quarantined"] == 1
    assert page.errors == [], page.errors


def test_cost_saved_shows_what_the_compressed_tokens_would_have_cost(fake, start_proxy, browser):
    proxy = start_proxy(pressure_config())
    compressed_traffic(proxy)  # gpt-4o over its window (tokens saved), and a model without a price
    stats = httpx.get(f"{proxy.url}/admin/stats", headers=AUTH).json()
    saved = stats["tokens"]["by_model"]["gpt-4o"]["saved"]
    assert saved > 0 and stats["cost_saved_usd"] == pytest.approx(saved * 2.5e-6, rel=1e-6)
    page = signed_in_page(browser, proxy)
    cost = page.get_by_test_id("cost-saved")
    assert float(cost.get_attribute("data-usd")) == pytest.approx(stats["cost_saved_usd"])
    shown = cost.inner_text()
    assert shown.startswith("$0.00") and float(shown[1:]) == pytest.approx(stats["cost_saved_usd"], rel=0.05), shown
    assert "unpriced: my-llama" in page.locator("#cost-sub").inner_text()
    assert page.get_by_test_id("tokens-saved").inner_text() == str(int(stats["tokens"]["saved"]))
    assert page.errors == [], page.errors


def test_the_page_polls_when_the_stream_fails(fake, start_proxy, browser):
    proxy = start_proxy({"policies": policies_off()})
    client = openai_client(proxy)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    page = signed_in_page(browser, proxy, without_stream=True)
    sync_api.expect(page.locator("body")).to_have_attribute("data-live", "polling")
    assert page.get_by_test_id("requests-total").inner_text() == "1"
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "again"}])
    sync_api.expect(page.get_by_test_id("requests-total")).to_have_text("2", timeout=6_000)  # polled every 4 s
    assert "polling" in page.locator("#status").inner_text()
    assert [e for e in page.errors if "503" not in e] == [], page.errors  # only the refused stream


def test_the_alert_banner_shows_when_the_blocked_rate_passes_alert_rate(fake, start_proxy, browser):
    policies = policies_off("poisoning")
    policies["poisoning"] = {"enabled": True, "alert_rate": 0.2, "alert_min_samples": 2}
    proxy = start_proxy({"policies": policies})
    r = httpx.post(f"{proxy.url}/admin/kb/documents", json={"documents": FACTS}, headers=AUTH)
    assert r.status_code == 200, r.text
    client = openai_client(proxy)
    fake.reply(content="Inception is starring Leonardo DiCaprio.")
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Who stars in it?"}])
    page = signed_in_page(browser, proxy)
    banner = page.get_by_test_id("poisoning-alert")
    assert banner.is_hidden()  # one answer checked, none blocked
    fake.reply(content="Inception is starring Tom Cruise.")
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Who is the lead?"}])
    sync_api.expect(banner).to_be_visible(timeout=5_000)  # 1 of 2 blocked: 50 % > 20 %, live
    assert "50.0%" in banner.inner_text() and "20.0%" in banner.inner_text()
    assert page.errors == [], page.errors


def test_each_client_keys_usage_shows_on_the_page(fake, start_proxy, browser):
    proxy = start_proxy({"auth": {"mode": "keys"}, "policies": policies_off()})
    made = httpx.post(f"{proxy.url}/admin/keys", headers=AUTH, json={"tenant": "acme", "name": "ci-bot"}).json()
    client = openai_client(proxy, api_key=made["key"])
    for i in range(3):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": f"hello {i}"}])
    page = signed_in_page(browser, proxy)
    row = page.get_by_test_id("client-keys").locator(f"[data-id='{made['id']}']")
    sync_api.expect(row).to_contain_text("ci-bot", timeout=5_000)
    cells = row.locator("td").all_inner_texts()
    assert cells[2] == "acme" and cells[3] == "3" and int(cells[4]) > 0 and cells[6] == "active"
    assert made["key"] not in page.content() and page.errors == []
