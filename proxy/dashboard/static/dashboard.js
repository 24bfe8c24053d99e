// ctxwarden dashboard: live figures from /admin/stats/stream (server-sent events), or by polling
// /admin/stats every POLL_MS when the stream fails; draws with plain SVG (no library, no CDN).
"use strict";
(function () {
  const POLL_MS = 4000;
  const STREAM_FAILURES = 3;  // errors in a row with no event between them: poll instead
  const COLORS = ["#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];
  const SVG = "http://www.w3.org/2000/svg";
  let windowName = "1h";
  let timer = null;
  let source = null;
  let failures = 0;

  const $ = (id) => document.getElementById(id);
  const fmt = (n) => n == null ? "–" : Math.abs(n) >= 1e6 ? (n / 1e6).toFixed(1) + "M" : Math.abs(n) >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(Math.round(n * 100) / 100);
  const pct = (x) => (x * 100).toFixed(1) + "%";

  function el(tag, attrs, text) {
    const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text != null) node.textContent = text;
    return node;
  }

  // A line chart of several series over the same buckets (unix seconds), with a legend.
  function lineChart(target, buckets, series) {
    const W = 600, H = 160, L = 40, B = 18, T = 6;
    const names = Object.keys(series);
    const max = Math.max(1, ...names.flatMap((n) => series[n]));
    const x = (i) => L + (buckets.length < 2 ? 0 : (i * (W - L - 4)) / (buckets.length - 1));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
    svg.appendChild(el("svg:line", { x1: L, y1: H - B, x2: W, y2: H - B, class: "axis" }));
    svg.appendChild(el("svg:text", { x: 2, y: T + 8 }, fmt(max)));
    svg.appendChild(el("svg:text", { x: 2, y: H - B }, "0"));
    if (buckets.length) {
      svg.appendChild(el("svg:text", { x: L, y: H - 4 }, new Date(buckets[0] * 1000).toLocaleString()));
      svg.appendChild(el("svg:text", { x: W - 4, y: H - 4, "text-anchor": "end" }, "now"));
    }
    names.forEach((name, k) => {
      const points = series[name].map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      svg.appendChild(el("svg:polyline", { points, fill: "none", stroke: COLORS[k % COLORS.length], "stroke-width": 1.8,
        "vector-effect": "non-scaling-stroke", "data-series": name }));
    });
    const legend = el("div", { class: "legend" });
    names.forEach((name, k) => {
      const item = el("span");
      const swatch = el("i");
      swatch.style.background = COLORS[k % COLORS.length];  // CSSOM, not a style attribute: allowed by the CSP
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(`${name} (${fmt(series[name].reduce((a, b) => a + b, 0))})`));
      legend.appendChild(item);
    });
    target.replaceChildren(svg, legend);
  }

  // Horizontal bars: {name: value} (or {name: {field: value}} with `field`).
  function bars(target, data, field) {
    const rows = Object.entries(data || {}).map(([k, v]) => [k, field ? v[field] : v]).slice(0, 12);
    const max = Math.max(1, ...rows.map((r) => r[1]));
    if (!rows.length) { target.replaceChildren(el("div", { class: "muted" }, "nothing yet")); return; }
    target.replaceChildren(...rows.map(([name, value]) => {
      const row = el("div", { class: "bar" });
      row.appendChild(el("span", { class: "name", title: name }, name));
      const track = el("span", { class: "track" });
      const fill = el("span", { class: "fill" });
      fill.style.width = `${(100 * value / max).toFixed(1)}%`;
      track.appendChild(fill);
      row.appendChild(track);
      row.appendChild(el("span", { class: "num" }, fmt(value)));
      return row;
    }));
  }

  function tiles(s) {
    $("requests-total").textContent = String(s.requests.total);
    $("requests-rate").textContent = `${fmt(s.requests.per_minute)} / min`;
    $("tokens-received").textContent = fmt(s.tokens.received);
    $("tokens-forwarded").textContent = `${fmt(s.tokens.forwarded)} forwarded`;
    $("tokens-saved").textContent = String(s.tokens.saved);
    $("tokens-share").textContent = s.tokens.received ? `${pct(s.tokens.saved / s.tokens.received)} of received` : "";
    costSaved(s);
    const p = s.poisoning;
    $("poisoning-blocked").textContent = fmt(p.blocked);
    $("poisoning-rate").textContent = `${pct(p.blocked_rate)} of ${fmt(p.checked)} checked · ${fmt(p.quarantined)} held`;
    $("clashes-total").textContent = fmt(s.clashes.total);
    $("clashes-sub").textContent = Object.entries(s.clashes.by_resolution).map(([k, v]) => `${k} ${v}`).join(" · ");
    $("loops-stopped").textContent = fmt(s.loops.stopped);
    $("loops-sub").textContent = Object.entries(s.loops.by_kind).map(([k, v]) => `${k} ${v}`).join(" · ");
    const breaker = $("breaker");
    breaker.textContent = `breaker: ${s.breaker}`;
    breaker.className = `badge ${s.breaker}`;
    const m = s.memory || {}, mb = (b) => Math.round(b / 1048576);
    $("memory").textContent = `memory: ${m.resident_bytes == null ? "?" : `${mb(m.resident_bytes)} MB`}` +
      (m.cache_bytes == null ? "" : ` · caches ${mb(m.cache_bytes)} of ${mb(m.cache_budget_bytes)} MB`);
    const alert = $("alert");
    alert.hidden = !p.alert;
    alert.textContent = p.alert ? `Poisoning alert: ${pct(p.blocked_rate)} of checked answers were blocked (alert rate ${pct(p.alert_rate)}).` : "";
  }

  // Tokens saved × each model's input price (litellm's model map); "–" when no model has a price.
  function costSaved(s) {
    const usd = s.cost_saved_usd, tile = $("cost-saved");
    tile.textContent = usd == null ? "–" : money(usd);
    tile.dataset.usd = usd == null ? "" : String(usd);
    const unpriced = Object.entries(s.tokens.by_model).filter(([, row]) => row.cost_saved_usd == null).map(([m]) => m);
    $("cost-sub").textContent = usd == null ? (unpriced.length ? "no input price known" : "")
      : "at input prices" + (unpriced.length ? ` · unpriced: ${unpriced.slice(0, 3).join(", ")}` : "");
  }

  function money(usd) {
    const a = Math.abs(usd);
    const text = a >= 100 ? a.toFixed(0) : a >= 1 ? a.toFixed(2) : a === 0 ? "0"
      : a.toFixed(Math.min(12, 1 - Math.floor(Math.log10(a))));  // two significant digits, never 1e-7
    return (usd < 0 ? "−$" : "$") + text;
  }

  function quarantine(q) {
    const list = $("quarantine-list");
    $("quarantine-count").textContent = q.enabled ? `${q.total} pending` : "(poisoning policy off)";
    if (!q.pending.length) { list.replaceChildren(el("li", { class: "muted empty" }, "nothing waiting")); return; }
    list.replaceChildren(...q.pending.map((item) => {
      const li = el("li", { "data-testid": "quarantine-item", "data-id": item.id });
      const body = el("div");
      body.appendChild(el("div", { class: "claim" }, item.claim || "(no claim)"));
      body.appendChild(el("div", { class: "evidence" }, `KB: ${item.evidence || "–"}`));
      body.appendChild(el("div", { class: "evidence" }, `${item.id} · ${item.type || ""} · ${item.tenant || "shared"}` + (item.text ? ` · ${item.text}` : "")));
      const actions = el("div", { class: "actions" });
      for (const decision of ["approve", "reject"]) {
        const button = el("button", { type: "button", "data-testid": decision }, decision === "approve" ? "Approve" : "Reject");
        button.addEventListener("click", () => review(item.id, decision, button));
        actions.appendChild(button);
      }
      li.append(body, actions);
      return li;
    }));
  }

  async function review(id, decision, button) {
    button.disabled = true;
    const r = await fetch(`/dashboard/quarantine/${encodeURIComponent(id)}/${decision}`,
      { method: "POST", credentials: "same-origin", headers: { "x-ctxwarden-dashboard": "1" } });
    if (!r.ok) { $("status").textContent = `${decision} failed: HTTP ${r.status}`; button.disabled = false; return; }
    await refresh();
  }

  function recent(rows, showContent) {
    $("content-head").hidden = !showContent;
    $("recent").replaceChildren(...rows.map((r) => {
      const tr = el("tr");
      const cells = [new Date(r.time * 1000).toLocaleTimeString(), r.id.slice(0, 10), r.model, r.tenant, r.outcome,
        r.actions.join(", "), r.latency_ms == null ? "–" : String(r.latency_ms),
        r.tokens_before == null ? "–" : `${r.tokens_before} → ${r.tokens_after}`];
      if (showContent) cells.push(r.content || "");
      cells.forEach((text, i) => tr.appendChild(el("td", i === 4 ? { class: `outcome-${r.outcome}` } : i >= 6 && i < 8 ? { class: "num" } : {}, text)));
      return tr;
    }));
  }

  function clientKeys(k) {
    k = k || { mode: null, keys: [] };
    $("keys-mode").textContent = k.mode === "keys" ? `(${k.keys.length} keys)` : `(auth.mode: ${k.mode || "unset"}; no client keys asked)`;
    $("client-keys").replaceChildren(...k.keys.map((row) => {
      const tr = el("tr", { "data-testid": "client-key", "data-id": row.id });
      const used = row.usage || {};
      [row.hint || row.id, row.name || "", row.tenant, fmt(used.requests || 0), fmt(used.tokens || 0),
        used.last_used ? new Date(used.last_used * 1000).toLocaleString() : "–", row.revoked_at ? "revoked" : "active"]
        .forEach((text, i) => tr.appendChild(el("td", i === 3 || i === 4 ? { class: "num" } : {}, text)));
      return tr;
    }));
  }

  function render(s) {
    tiles(s);
    lineChart($("requests-chart"), s.buckets, { requests: s.requests.series });
    lineChart($("tokens-chart"), s.buckets, s.tokens.series);
    lineChart($("actions-chart"), s.buckets, Object.keys(s.actions.series).length ? s.actions.series : { "no actions": s.buckets.map(() => 0) });
    bars($("actions-bars"), s.actions.total);
    lineChart($("poisoning-chart"), s.buckets, s.poisoning.series);
    bars($("by-model"), s.requests.by_model);
    bars($("by-tenant"), s.requests.by_tenant);
    bars($("by-api"), s.requests.by_api || {});
    bars($("clashes"), s.clashes.by_type_and_resolution);
    bars($("loops"), s.loops.by_kind);
    quarantine(s.quarantine);
    clientKeys(s.client_keys);
    recent(s.recent, s.show_content);
  }

  function show(s, how) {
    render(s);
    $("status").textContent = `${how} · updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = "1";
  }

  async function refresh() {
    try {
      const r = await fetch(`/admin/stats?window=${windowName}`, { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401 || r.status === 403) { window.location.reload(); return; }
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      show(await r.json(), source ? "live" : "polling");
    } catch (err) {
      $("status").textContent = `update failed: ${err.message}`;
    }
  }

  function poll() {
    document.body.dataset.live = "polling";
    if (!timer) timer = setInterval(refresh, POLL_MS);
    refresh();
  }

  // The stream: an event whenever the figures change (keep-alive comments between). EventSource
  // reconnects by itself when a stream ends; after STREAM_FAILURES errors with no event, or a refusal, poll.
  function connect() {
    if (source) source.close();
    source = null;
    if (!window.EventSource || document.body.dataset.live === "polling") { poll(); return; }
    const stream = new EventSource(`/admin/stats/stream?window=${windowName}`);
    source = stream;
    stream.onmessage = (e) => {
      failures = 0;
      document.body.dataset.live = "stream";
      show(JSON.parse(e.data), "live");
    };
    stream.onerror = () => {
      if (stream !== source) return;
      failures += 1;
      if (stream.readyState === EventSource.CLOSED || failures >= STREAM_FAILURES) {
        stream.close();
        source = null;
        poll();  // a refusal (401) makes the poll reload the page: the login form
      }
    };
  }

  function start() {
    for (const button of document.querySelectorAll("#windows button")) {
      button.addEventListener("click", () => {
        windowName = button.dataset.window;
        document.querySelectorAll("#windows button").forEach((b) => b.classList.toggle("active", b === button));
        if (source) connect(); else refresh();
      });
    }
    connect();
  }

  document.addEventListener("DOMContentLoaded", start);
  window.addEventListener("beforeunload", () => { clearInterval(timer); if (source) source.close(); });
})();
