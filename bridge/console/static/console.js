// reminder-bridge operator console: /api/status every second, /api/events as a live feed.
// Plain DOM, no build step, nothing loaded from elsewhere. Everything from the proxy is shown
// with textContent, control characters written visibly (`shown`): client names, ids, reasons and
// bodies come from untrusted peers.
"use strict";

(function () {
  const MAX_ROWS = 500;          // rows kept in the feed table
  const PAUSE_BUFFER = 1000;     // decisions held while paused; beyond that they are lost (and counted)
  const POLL_MS = 1000;
  const ACTIONS = ["rewritten", "passed", "queued", "coalesced", "dropped", "rate_limited", "refused", "invalid",
                   "rendered", "attached", "synthesized"];
  const DIALECTS = ["standard", "legacy", "none"];

  // C0, DEL, C1, line/paragraph separators and bidi controls: the class bridge/display.py escapes
  const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
  const hex = (c, width) => c.charCodeAt(0).toString(16).padStart(width, "0");
  // text as the operator should read it: `\x1b` for an ESC, `\u202e` for a right-to-left override;
  // `lines`: newlines and tabs kept (a body, shown with white-space: pre-wrap)
  const shown = (text, lines = false) => String(text).replace(UNSAFE, (c) =>
    lines && (c === "\n" || c === "\t") ? c : c.charCodeAt(0) < 0x100 ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`);

  const $ = (id) => document.getElementById(id);
  const state = {
    paused: false, held: [], received: 0, lostServer: 0, lostServerBase: 0, lostPaused: 0,
    showBodies: false, routes: new Set(), filters: {route: "", action: "", source: ""},
  };

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = shown(v);
      else if (k === "title") el.setAttribute(k, shown(v));
      else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "hidden")
        el.setAttribute(k, v === true ? "" : String(v));
      else el[k] = v;
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(shown(child)));
    }
    return el;
  }

  function ago(t, now) {
    if (t === null || t === undefined) return "never";
    const s = Math.max(0, now - t);
    if (s < 60) return `${Math.round(s)} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${(s / 3600).toFixed(1)} h ago`;
    return `${(s / 86400).toFixed(1)} d ago`;
  }

  function clock(t) {
    const d = new Date(t * 1000);
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function span(seconds) {
    if (seconds >= 3600 && seconds % 3600 === 0) return `${seconds / 3600} h`;
    if (seconds >= 60 && seconds % 60 === 0) return `${seconds / 60} min`;
    return `${seconds} s`;
  }

  // -- status ------------------------------------------------------------------------------------
  function dialectBar(side, dialects, now) {
    const total = DIALECTS.reduce((n, d) => n + dialects[d].in_window, 0);
    const bar = h("div", {class: "bar", role: "img", "data-side": side,
                          "aria-label": `${side}s: ` + DIALECTS.map((d) => `${dialects[d].in_window} ${d}`).join(", ")});
    for (const d of DIALECTS) {
      const n = dialects[d].in_window;
      if (!n) continue;
      bar.append(h("span", {class: `seg ${d}`, "data-dialect": d, "data-count": n,
                            title: `${d}: ${n} in the window, ${dialects[d].count} in all, last ${ago(dialects[d].last_seen, now)}`},
                   ));
      bar.lastChild.style.flexGrow = String(n);
    }
    if (!total) bar.append(h("span", {class: "seg empty", text: "nothing seen"}));
    const legend = h("div", {class: "legend"},
      DIALECTS.map((d) => h("span", {class: `key ${d}`, "data-dialect": d},
                             `${d} ${dialects[d].in_window}`,
                             dialects[d].last_seen ? h("small", {}, ` · ${ago(dialects[d].last_seen, now)}`) : null)));
    return h("div", {class: "mix"}, h("span", {class: "side", text: side === "host" ? "hosts" : "peers"}), bar, legend);
  }

  function gauge(b) {
    const pct = b.limit ? Math.max(0, Math.min(100, (b.tokens / b.limit) * 100)) : 0;
    const level = pct < 20 ? "low" : pct < 50 ? "mid" : "ok";
    const fill = h("span", {class: `fill ${level}`});
    fill.style.width = pct.toFixed(1) + "%";
    return h("div", {class: "gauge", "data-scope": b.scope, "data-tokens": b.tokens, "data-limit": b.limit,
                     role: "meter", "aria-valuemin": 0, "aria-valuemax": b.limit, "aria-valuenow": b.tokens,
                     "aria-label": `budget ${b.scope}`},
      h("span", {class: "gauge-label"}, h("b", {text: b.scope}),
        ` ${b.tokens.toFixed(1)} / ${b.limit} tokens · ${b.rate}/min` + (b.shadow ? " · shadow" : "") +
        (b.keys > 1 ? ` · ${b.keys} keys` : "")),
      h("span", {class: "track"}, fill));
  }

  function routeCard(r, now) {
    const ready = r.readiness;
    const actions = h("div", {class: "actions"},
      Object.entries(r.actions).filter(([a, n]) => n || ACTIONS.indexOf(a) < 8).map(([a, n]) =>
        h("div", {class: `count ${n ? "" : "zero"}`, "data-action": a},
          h("b", {text: String(n)}), h("span", {text: a.replace("_", " ")}))));
    const pending = Object.entries(r.pending);
    const hostClients = r.clients.host.slice(0, 8);
    return h("article", {class: "route", "data-route": r.name},
      h("header", {},
        h("h3", {text: r.name}),
        h("span", {class: "tag", text: r.protocol || "?"}),
        h("span", {class: `tag stage ${r.stage || ""}`, "data-stage": r.stage || "", text: r.stage || "stage ?"}),
        r.transport ? h("span", {class: "tag muted", text: r.transport}) : null,
        r.sessions !== null && r.sessions !== undefined ? h("span", {class: "tag muted", text: `${r.sessions} sessions`}) : null),
      h("div", {class: "route-body"},
        h("div", {class: "col"},
          h("p", {class: `verdict ${ready.ready ? "yes" : "no"}${ready.seen ? "" : " unseen"}`, "data-ready": ready.verdict},
            h("b", {text: `ready for enforce: ${ready.verdict}`}), ` — ${ready.evidence}`),
          ready.note ? h("p", {class: "note", text: ready.note}) : null,
          h("div", {class: "mixes"}, dialectBar("host", r.dialects.host, now), dialectBar("peer", r.dialects.peer, now)),
          hostClients.length ? h("p", {class: "clients"}, h("span", {class: "muted", text: "hosts by name: "}),
            hostClients.map((c, i) => h("span", {class: `client ${c.dialect}`,
                                                 title: `${c.count} handshakes, last ${ago(c.last_seen, now)}`},
              (i ? ", " : "") + `${c.name} (${c.dialect})`))) : null),
        h("div", {class: "col"},
          actions,
          h("div", {class: "budgets"}, r.budgets.length ? r.budgets.map(gauge) : h("p", {class: "muted", text: "no budget"})),
          h("p", {class: "pending", "data-pending": r.pending_total},
            h("span", {class: "muted", text: "held now: "}),
            pending.length ? pending.map(([q, n]) => `${q} ${n}`).join(" · ") : "none"))));
  }

  function fillSelect(select, values) {
    const known = new Set(Array.from(select.options).map((o) => o.value));
    for (const v of values) if (!known.has(v)) select.append(h("option", {value: v, text: v}));
  }

  function renderStatus(data) {
    const now = data.time;
    $("window").textContent = span(data.window_s);
    $("updated").textContent = "updated " + clock(now);
    $("logout").hidden = !data.auth;
    const routes = $("routes");
    routes.replaceChildren(...(data.routes.length ? data.routes.map((r) => routeCard(r, now))
                                                  : [h("p", {class: "empty", text: "No route yet."})]));
    fillSelect($("filter-route"), data.routes.map((r) => r.name));
    fillSelect($("filter-action"), data.actions || ACTIONS);
    if (data.feed && data.feed.show_bodies !== state.showBodies) setBodies(data.feed.show_bodies);
  }

  async function poll() {
    try {
      const r = await fetch("/api/status", {credentials: "same-origin", cache: "no-store"});
      if (r.status === 401) { location.reload(); return; }
      if (r.ok) renderStatus(await r.json());
    } catch (e) {
      $("updated").textContent = "status unavailable";
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  // -- feed ----------------------------------------------------------------------------------------
  function setBodies(on) {
    state.showBodies = on;
    document.querySelectorAll(".body-col").forEach((el) => { el.hidden = !on; });
    $("bodies-note").textContent = on
      ? "Bodies are shown ([admin] show_bodies = true); sizes are in bytes."
      : "Bodies are hidden ([admin] show_bodies = false); sizes are in bytes.";
  }

  function matches(e) {
    const f = state.filters;
    return (!f.route || e.route === f.route) && (!f.action || e.action === f.action) && (!f.source || e.source === f.source);
  }

  function row(e) {
    const tr = h("tr", {"data-route": e.route, "data-action": e.action, "data-source": e.source || "",
                        "data-reminder-id": e.reminder_id || "", class: `a-${e.action}`},
      h("td", {class: "mono", text: clock(e.time)}),
      h("td", {text: e.route}),
      h("td", {class: "mono", text: e.session || "–"}),
      h("td", {text: e.direction === "toward_host" ? "→ host" : e.direction === "toward_peer" ? "→ peer" : "–"}),
      h("td", {}, h("span", {class: `badge ${e.action}`, text: e.action})),
      h("td", {class: "mono", text: e.reminder_id || "–"}),
      h("td", {class: "nowrap", text: `${e.source || "–"} → ${e.target || "–"}`}),
      h("td", {class: "num", text: e.size === null || e.size === undefined ? "–" : String(e.size)}),
      h("td", {class: "reason", text: e.reason || ""}),
      h("td", {class: "body-col body", hidden: !state.showBodies},
        document.createTextNode(e.body === undefined ? "" : shown(e.body, true))));
    return tr;
  }

  function show(e) {
    const body = document.querySelector("#feed tbody");
    const tr = row(e);
    tr.hidden = !matches(e);
    body.prepend(tr);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
    counts();
  }

  function counts() {
    const rows = document.querySelectorAll("#feed tbody tr");
    let visible = 0;
    rows.forEach((r) => { if (!r.hidden) visible += 1; });
    $("shown").textContent = String(visible);
    $("received").textContent = String(state.received);
    $("buffered").textContent = String(state.held.length);
    const lost = state.lostServerBase + state.lostServer + state.lostPaused;
    $("lost").textContent = String(lost);
    $("lost-box").dataset.lost = String(lost);
    $("lost-box").classList.toggle("warn", lost > 0);
  }

  function applyFilters() {
    document.querySelectorAll("#feed tbody tr").forEach((tr) => {
      tr.hidden = !matches({route: tr.dataset.route, action: tr.dataset.action, source: tr.dataset.source});
    });
    counts();
  }

  function connect() {
    const link = $("link");
    const source = new EventSource("/api/events");
    source.addEventListener("hello", (m) => {
      // a new connection: its own lost counter starts at zero
      state.lostServerBase += state.lostServer;
      state.lostServer = 0;
      const hello = JSON.parse(m.data);
      setBodies(!!hello.show_bodies);
      link.textContent = state.paused ? "paused" : "live";
      link.dataset.state = state.paused ? "paused" : "live";
    });
    source.addEventListener("decision", (m) => {
      const e = JSON.parse(m.data);
      state.received += 1;
      if (state.paused) {
        if (state.held.length >= PAUSE_BUFFER) { state.held.shift(); state.lostPaused += 1; }
        state.held.push(e);
        counts();
      } else {
        show(e);
      }
    });
    source.addEventListener("lost", (m) => { state.lostServer = JSON.parse(m.data).lost; counts(); });
    source.addEventListener("handshake", () => {});
    source.onerror = () => {
      link.textContent = "reconnecting…";
      link.dataset.state = "down";
      fetch("/api/status", {credentials: "same-origin"}).then((r) => { if (r.status === 401) location.reload(); })
        .catch(() => {});
    };
  }

  function init() {
    fillSelect($("filter-action"), ACTIONS);
    for (const name of ["route", "action", "source"]) {
      $(`filter-${name}`).addEventListener("change", (ev) => { state.filters[name] = ev.target.value; applyFilters(); });
    }
    $("pause").addEventListener("click", () => {
      state.paused = !state.paused;
      $("pause").textContent = state.paused ? "Resume" : "Pause";
      $("pause").setAttribute("aria-pressed", String(state.paused));
      $("link").textContent = state.paused ? "paused" : "live";
      $("link").dataset.state = state.paused ? "paused" : "live";
      if (!state.paused) {
        const held = state.held;
        state.held = [];
        held.forEach(show);
      }
      counts();
    });
    $("clear").addEventListener("click", () => { document.querySelector("#feed tbody").replaceChildren(); counts(); });
    connect();
    poll();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
