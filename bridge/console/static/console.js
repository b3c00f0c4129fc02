// reminder-bridge operator console: /api/status every second, /api/events as a live feed.
// Plain DOM, no build step, nothing loaded from elsewhere: the charts are inline <svg> this script
// draws from the status's per-minute series. Everything from the proxy is shown with textContent,
// control characters written visibly (`shown`): client names, ids, reasons and bodies come from
// untrusted peers.
"use strict";

(function () {
  const MAX_ROWS = 500;          // rows kept in the feed table
  const PAUSE_BUFFER = 1000;     // decisions held while paused; beyond that they are lost (and counted)
  const POLL_MS = 1000;
  const ACTIONS = ["rewritten", "passed", "queued", "coalesced", "dropped", "rate_limited", "refused", "invalid",
                   "rendered", "attached", "synthesized"];
  const DIALECTS = ["standard", "legacy", "none"];
  const ERAS = ["2025-11-25", "2026-07-28"];   // MCP revisions: initialize and sessions, discover and envelopes

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

  // An element with its attributes and children; text (`text`, `title`, `aria-label`, string
  // children) always goes through `shown`. `svg`: an SVG element, whose attributes are all set as such.
  function build(el, attrs, children, svg) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") el.textContent = shown(v);
      else if (k === "title" || k === "aria-label") el.setAttribute(k, shown(v));
      else if (svg || k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "hidden")
        el.setAttribute(k, v === true ? "" : String(v));
      else if (k === "class") el.className = v;
      else el[k] = v;
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(shown(child)));
    }
    return el;
  }
  const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children, false);
  const SVG = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, ...children) => build(document.createElementNS(SVG, tag), attrs, children, true);

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

  function hhmm(t) {
    const d = new Date(t * 1000);
    return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
  }

  // "2026-12-01 18:24": a stamp that may be another day
  function dayTime(t) {
    const d = new Date(t * 1000);
    return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")} ${hhmm(t)}`;
  }

  function span(seconds) {
    if (seconds >= 3600 && seconds % 3600 === 0) return `${seconds / 3600} h`;
    if (seconds >= 60 && seconds % 60 === 0) return `${seconds / 60} min`;
    return `${seconds} s`;
  }

  // -- status ------------------------------------------------------------------------------------
  // One bar of hosts (or peers) seen in the window, a segment per dialect, or (`kind` "era") per MCP revision.
  function mixBar(side, who, table, kinds, kind, now) {
    const data = `data-${kind}`, cls = (k) => kind === "era" ? `era-${k}` : k;
    const total = kinds.reduce((n, k) => n + table[k].hosts, 0);
    const bar = h("div", {class: "bar", role: "img", [kind === "era" ? "data-era-side" : "data-side"]: side,
                          "aria-label": `${who} in the window: ` + kinds.map((k) => `${table[k].hosts} ${k}`).join(", ")});
    for (const k of kinds) {
      const n = table[k].hosts;
      if (!n) continue;
      bar.append(h("span", {class: `seg ${cls(k)}`, [data]: k, "data-count": n,
                            title: `${k}: ${n} ${n === 1 ? who.slice(0, -1) : who} in the window (${table[k].in_window} ` +
                                   `handshakes); ${table[k].count} handshakes since start-up, the last ${ago(table[k].last_seen, now)}`}));
      bar.lastChild.style.flexGrow = String(n);
    }
    if (!total) bar.append(h("span", {class: "seg empty", text: `no ${who.slice(0, -1)} seen`}));
    const legend = h("div", {class: "legend"},
      kinds.map((k) => h("span", {class: `key ${cls(k)}`, [data]: k},
                             `${k} ${table[k].hosts}`,
                             table[k].last_seen ? h("small", {}, ` · ${ago(table[k].last_seen, now)}`) : null)));
    return h("div", {class: "mix"}, h("span", {class: "side", text: who}), bar, legend);
  }
  const dialectBar = (side, dialects, now) =>
    mixBar(side, side === "host" ? "hosts" : "peers", dialects, DIALECTS, "dialect", now);

  // An MCP route's era mix: the bridge's verdict, hosts and servers per revision, the requests bridged.
  function eraMix(e, now) {
    const ready = e.readiness;
    const cut = ready.text.indexOf(" — ");
    const tone = ready.needed === null ? "unseen" : ready.needed ? "needed" : "idle";
    const bridged = e.bridged.length
      ? e.bridged.map((b) => `${b.requests} ${b.host_era} → ${b.server_era}`).join(" · ") : "none";
    return h("div", {class: "eras", "data-needed": String(ready.needed)},
      h("p", {class: "era-title muted", text: "MCP revisions (eras): hosts and servers seen in the same window"}),
      h("p", {class: `era-verdict ${tone}`}, h("b", {text: cut < 0 ? ready.text : ready.text.slice(0, cut)}),
        cut < 0 ? null : ready.text.slice(cut)),
      mixBar("host", "hosts", e.hosts, ERAS, "era", now), mixBar("server", "servers", e.servers, ERAS, "era", now),
      h("p", {class: "bridged muted", "data-bridged": e.bridged_requests,
              text: `host_era ${e.host_era} · server_era ${e.server_era} · requests bridged since the route's start: ${bridged}`}));
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

  // -- charts: the last hour, one slot per minute, the current minute last ---------------------------
  const W = 320, H = 128, LEFT = 30, RIGHT = 8, TOP = 8, BOTTOM = 22;
  const PLOT_W = W - LEFT - RIGHT, PLOT_H = H - TOP - BOTTOM;
  const ACTION_COLOURS = new Set([...ACTIONS, "channel"]);
  const label = (key) => key.replace(/_/g, " ");

  function niceMax(value) {
    if (value <= 1) return 1;
    const step = 10 ** Math.floor(Math.log10(value));
    return [1, 2, 5, 10].map((m) => m * step).find((m) => m >= value);
  }

  // The frame every chart shares: y ticks (0, half when it reads well, top), x ticks in minutes,
  // and where the counting started when that is inside the hour.
  function frame(series, top, since) {
    const minutes = series.minutes, slot = PLOT_W / minutes;
    const y = (v) => TOP + PLOT_H - (v / top) * PLOT_H;
    const parts = [];
    for (const v of top >= 2 ? [0, top / 2, top] : [0, top]) {
      parts.push(s("line", {class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v)}),
                 s("text", {class: "tick", x: LEFT - 4, y: y(v) + 3, "text-anchor": "end",
                            text: Number.isInteger(v) ? String(v) : v.toFixed(1)}));
    }
    for (const back of [60, 45, 30, 15, 0]) {
      const i = minutes - 1 - back;
      if (i < -1) continue;
      parts.push(s("text", {class: "tick", x: LEFT + Math.max(0, i + 0.5) * slot, y: H - 8,
                            "text-anchor": back === 60 ? "start" : back === 0 ? "end" : "middle",
                            text: back === 0 ? "now" : `−${back} min`}));
    }
    const startSlot = Math.floor((since - series.start) / series.minute_s);
    if (startSlot > 0 && startSlot < minutes) {
      parts.push(s("rect", {class: "before", x: LEFT, y: TOP, width: startSlot * slot, height: PLOT_H},
                   s("title", {text: `before ${hhmm(since)}: the route had not started, nothing was counted`})),
                 s("line", {class: "start", x1: LEFT + startSlot * slot, x2: LEFT + startSlot * slot, y1: TOP, y2: TOP + PLOT_H}),
                 s("text", {class: "tick start-label", x: LEFT + startSlot * slot - 3, y: TOP + 9, "text-anchor": "end",
                            text: "start"}));
    }
    return {parts, slot, y};
  }

  function chartBox(name, heading, svg, legend) {
    return h("figure", {class: "chart-box", "data-series": name},
      h("figcaption", {text: heading}), svg, legend);
  }

  // Stacked bars, one per minute: reminders by action, or refusals by limit.
  function barChart(name, heading, counts, series, since, colourOf, nothing) {
    const keys = Object.keys(counts).sort();
    const totals = Array.from({length: series.minutes}, (_, i) => keys.reduce((n, k) => n + counts[k][i], 0));
    const sum = (k) => counts[k].reduce((a, b) => a + b, 0);
    const all = keys.reduce((n, k) => n + sum(k), 0);
    const words = all ? keys.map((k) => `${label(k)} ${sum(k)}`).join(", ") : nothing;
    const top = niceMax(Math.max(0, ...totals));
    const {parts, slot, y} = frame(series, top, since);
    const svg = s("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "data-total": all,
                          "aria-label": `${heading}, the last ${series.minutes} minutes: ${words}`},
      s("title", {text: `${heading}: ${words}`}), parts);
    for (let i = 0; i < series.minutes; i += 1) {
      let base = 0;
      for (const k of keys) {
        const n = counts[k][i];
        if (!n) continue;
        const minute = series.start + i * series.minute_s;
        svg.append(s("rect", {class: `stack ${colourOf(k, keys)}`, "data-key": k, "data-value": n, "data-minute": minute,
                              x: LEFT + i * slot + 0.5, width: Math.max(1, slot - 1), y: y(base + n),
                              height: y(base) - y(base + n)},
          s("title", {text: `${hhmm(minute)}: ${label(k)} ${n}`})));
        base += n;
      }
    }
    if (!all) svg.append(s("text", {class: "nothing", x: LEFT + PLOT_W / 2, y: TOP + PLOT_H / 2, "text-anchor": "middle", text: nothing}));
    const legend = h("div", {class: "chart-legend"},
      keys.map((k) => h("span", {"data-key": k}, h("i", {class: `swatch ${colourOf(k, keys)}`}), `${label(k)} ${sum(k)}`)));
    return chartBox(name, heading, svg, legend);
  }

  // One budget: tokens left, the lowest reading of each minute, and the level now.
  function budgetChart(b, series, since) {
    const top = Math.max(1, b.limit || 1);
    const {parts, slot, y} = frame(series, top, since);
    const points = b.tokens.map((v, i) => (v === null ? null : [LEFT + (i + 0.5) * slot, y(Math.max(0, v)), v,
                                                               series.start + i * series.minute_s]))
      .filter((p) => p);
    if (b.now !== null && b.now !== undefined) points.push([W - RIGHT, y(Math.max(0, b.now)), b.now, null]);
    const words = b.now !== null && b.now !== undefined ? `${b.now.toFixed(1)} of ${b.limit} tokens now` : "not read yet";
    const heading = `Budget ${b.label}: tokens left, the lowest reading of each minute`;
    const svg = s("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "data-points": points.length,
                          "aria-label": `${heading}, the last ${series.minutes} minutes; ${words}`},
      s("title", {text: `${heading}: ${words}`}), parts,
      points.length > 1 ? s("polyline", {class: "level", points: points.map((p) => `${p[0]},${p[1]}`).join(" ")}) : null,
      points.map(([x, py, v, minute]) => s("circle", {class: minute === null ? "point now" : "point", cx: x, cy: py, r: 2.5,
                                                      "data-value": v, "data-minute": minute},
        s("title", {text: `${minute === null ? "now" : hhmm(minute)}: ${v.toFixed(1)} tokens`}))));
    const legend = h("div", {class: "chart-legend"},
      h("span", {}, `burst ${b.limit} · ${b.rate}/min` + (b.shadow ? " · shadow" : "") + ` · ${words}`));
    return chartBox(`budget-${b.kind}`, heading, svg, legend);
  }

  function charts(r) {
    const series = r.series;
    if (!series) return null;
    const actionColour = (k) => `k-${ACTION_COLOURS.has(k) ? k : "other"}`;
    const causeColour = (k, keys) => `p${keys.indexOf(k) % 6}`;
    return h("section", {class: "charts", "aria-label": `${r.name}: the last ${series.minutes} minutes`},
      h("h4", {}, `The last ${series.minutes} minutes`,
        h("small", {class: "muted", text: ` · counting since ${clock(r.since).slice(0, 8)} (the route's start)`})),
      h("div", {class: "chart-grid"},
        barChart("actions", "Reminders per minute, by action", series.actions, series, r.since, actionColour,
                 "no reminder in the last hour"),
        barChart("refusals", "Refusals per minute, by limit", series.refusals, series, r.since, causeColour,
                 "no refusal in the last hour"),
        series.budgets.length ? series.budgets.map((b) => budgetChart(b, series, r.since))
                              : h("p", {class: "muted chart-box", text: "no budget on this route"})));
  }

  function verdict(ready) {
    const cut = ready.text.indexOf(" — ");
    const head = cut < 0 ? ready.text : ready.text.slice(0, cut);
    const tone = ready.ready === null ? "unseen" : `${ready.ready ? "yes" : "no"}${ready.seen ? "" : " unseen"}`;
    return h("p", {class: `verdict ${tone}`, "data-ready": ready.verdict},
      h("b", {text: head}), cut < 0 ? null : ready.text.slice(cut));
  }

  function routeCard(r, now) {
    const ready = r.readiness;
    const actions = h("div", {class: "actions"},
      Object.entries(r.actions).filter(([a, n]) => n || ACTIONS.indexOf(a) < 8).map(([a, n]) =>
        h("div", {class: `count ${n ? "" : "zero"}`, "data-action": a},
          h("b", {text: String(n)}), h("span", {text: label(a)}))));
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
          verdict(ready),
          ready.note ? h("p", {class: "note", text: ready.note}) : null,
          h("div", {class: "mixes"},
            h("p", {class: "since muted", "data-since": ready.since,
                    text: ready.since_start_up ? `seen since ${clock(ready.since).slice(0, 8)} (start-up), each counted once`
                                               : `seen in the last ${span(ready.window_s)}, since ${dayTime(ready.since)}, each counted once`}),
            dialectBar("host", r.dialects.host, now), dialectBar("peer", r.dialects.peer, now)),
          r.eras ? eraMix(r.eras, now) : null,
          hostClients.length ? h("p", {class: "clients"}, h("span", {class: "muted", text: "hosts by name: "}),
            hostClients.map((c, i) => h("span", {class: `client ${c.dialect}`,
                                                 title: `${c.hosts} ${c.hosts === 1 ? "host" : "hosts"}, ${c.count} handshakes, ` +
                                                        `the last ${ago(c.last_seen, now)}`},
              (i ? ", " : "") + `${c.name} (${c.dialect})`))) : null),
        h("div", {class: "col"},
          h("p", {class: "since muted", text: `reminders since ${clock(r.since).slice(0, 8)} (the route's start)`}),
          actions,
          h("div", {class: "budgets"}, r.budgets.length ? r.budgets.map(gauge) : h("p", {class: "muted", text: "no budget"})),
          h("p", {class: "pending", "data-pending": r.pending_total},
            h("span", {class: "muted", text: "held now: "}),
            r.held.length ? r.held.map((q) => `${q.count} ${q.label}`).join(" · ") : "nothing"))),
      charts(r));
  }

  function fillSelect(select, values) {
    const known = new Set(Array.from(select.options).map((o) => o.value));
    for (const v of values) if (!known.has(v)) select.append(h("option", {value: v, text: v}));
  }

  function renderStatus(data) {
    const now = data.time;
    $("window").textContent = span(data.window_s);
    $("since").textContent = `${hhmm(data.since)} (${ago(data.since, now).replace(" ago", "")})`;
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
      e.reminder_id ? h("td", {class: "mono", text: e.reminder_id})  // none: a handshake's capabilities, or no valid reminder
                    : h("td", {class: "muted", text: e.action === "rewritten" ? "the handshake's capabilities" : "no id"}),
      h("td", {class: "nowrap", text: e.source || e.target ? `${e.source || "not known yet"} → ${e.target || "not known yet"}`
                                                           : "no dialect seen yet"}),
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
    $("opened").textContent = clock(Date.now() / 1000).slice(0, 8);
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
