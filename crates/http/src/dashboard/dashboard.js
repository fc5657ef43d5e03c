// dummynet's dashboard: live counters and charts of a running daemon.
//
// Where the numbers come from:
// - GET /metrics every second (the Prometheus text the daemon serves):
//   per-pipe delivered bytes and drops are counters, so throughput and
//   drop rates are their differences over the polling interval; queue
//   occupancy is a gauge.
// - GET /v1/events (Server-Sent Events of per-packet events): each packet's
//   time in its pipe (queue, link and delay line), the time it left the
//   pipe (`departure`, or `forward` on a bridge) less its arrival (both
//   events carry its id), summarised per second as median and maximum. A
//   stream that cannot keep up loses events and is told so (`lost`): the
//   delay chart then shows a sample, and says so, never a made-up value.
// - GET /v1/stats, /v1/pipes and /v1/rules every second: totals, release
//   lateness, and the configuration and counters tables.
// - POST /v1/commands: the form, applied all or nothing.
//
// No library and no network beyond the daemon: the charts are drawn on
// canvases here. The page's state is exposed as window.dummynetDashboard
// so a headless browser test can check that the charts hold data.
"use strict";

const POLL_MS = 1000;
const WINDOW_S = 120; // seconds of history a chart shows, at most
const MIN_SPAN_S = 20; // ... and at least, while it has less
const MAX_OPEN_IDS = 50000; // arrivals waiting for their departure event

// ---------------------------------------------------------------- format

function siPrefix(v, unit) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(a >= 1e10 ? 0 : 1)} G${unit}`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(a >= 1e7 ? 0 : 1)} M${unit}`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(a >= 1e4 ? 0 : 1)} k${unit}`;
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
}
const fmtRate = (bps) => siPrefix(bps, "bit/s");
const fmtCount = (n) => (n === undefined ? "–" : Number(n).toLocaleString("en-US"));
function fmtNs(ns) {
  if (ns === undefined || ns === null) return "–";
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(2)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(ns >= 1e7 ? 1 : 2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${ns} ns`;
}
const fmtMs = (ms) => `${trim(ms)} ms`;
// A tick value without trailing zeros: 0.25, 2, 12.5.
const trim = (v) => String(Number(v.toPrecision(6)));

// ---------------------------------------------------------------- chart

// A time-series line chart on a canvas: x is wall-clock seconds (the last
// WINDOW_S), y autoscales from 0 to a round number above the data.
class LineChart {
  constructor(canvas, { format, series }) {
    this.canvas = canvas;
    this.format = format;
    // series: [{ name, color, dash }]; data: one [t, y] array per series.
    this.series = series;
    this.data = series.map(() => []);
    this.capacity = null; // an optional horizontal line (a link's rate)
  }

  push(i, t, y) {
    const d = this.data[i];
    d.push([t, y]);
    while (d.length && d[0][0] < t - WINDOW_S) d.shift();
  }

  points() {
    return this.data.reduce((n, d) => n + d.length, 0);
  }

  draw(now) {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 70, right = 24, top = 18, bottom = 22;
    const pw = w - left - right, ph = h - top - bottom;

    // x: from the first point (at least MIN_SPAN_S, at most WINDOW_S back)
    // to now; y: from 0 to a round number above the data and the capacity.
    let first = now;
    for (const d of this.data) if (d.length) first = Math.min(first, d[0][0]);
    const span = Math.min(WINDOW_S, Math.max(MIN_SPAN_S, now - first));
    let top_value = this.capacity || 0;
    for (const d of this.data) for (const [, y] of d) top_value = Math.max(top_value, y);
    const ticks = niceTicks(top_value * 1.05);
    const ymax = ticks[ticks.length - 1];
    const x = (t) => left + ((t - (now - span)) / span) * pw;
    const y = (v) => top + ph - (v / ymax) * ph;

    // grid and axes
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b6f75";
    g.strokeStyle = "#e3e4e6";
    g.lineWidth = 1;
    g.textAlign = "right";
    g.textBaseline = "middle";
    for (const v of ticks) {
      g.beginPath();
      g.moveTo(left, y(v));
      g.lineTo(left + pw, y(v));
      g.stroke();
      g.fillText(this.format(v), left - 6, y(v));
    }
    g.textAlign = "center";
    g.textBaseline = "top";
    const step = niceTicks(span)[1] || span;
    for (let s = 0; s <= span + 1e-9; s += step) {
      g.fillText(s === 0 ? "now" : `−${Math.round(s)} s`, x(now - s), top + ph + 5);
    }

    g.save();
    g.beginPath();
    g.rect(left, top - 1, pw, ph + 2);
    g.clip();
    if (this.capacity) {
      g.strokeStyle = "#c0392b";
      g.setLineDash([5, 4]);
      g.beginPath();
      g.moveTo(left, y(this.capacity));
      g.lineTo(left + pw, y(this.capacity));
      g.stroke();
      g.setLineDash([]);
    }
    this.series.forEach((s, i) => {
      const d = this.data[i];
      if (!d.length) return;
      g.strokeStyle = s.color;
      g.fillStyle = s.color;
      g.lineWidth = 1.6;
      g.setLineDash(s.dash || []);
      g.beginPath();
      d.forEach(([t, v], k) => (k ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
      g.stroke();
      g.setLineDash([]);
      // A lone point is a dot, not an invisible line.
      if (d.length === 1) {
        g.beginPath();
        g.arc(x(d[0][0]), y(d[0][1]), 2.5, 0, 2 * Math.PI);
        g.fill();
      }
    });
    g.restore();

    // legend
    g.textAlign = "left";
    g.textBaseline = "middle";
    let lx = left + 4;
    const legend = this.series.map((s) => [s.name, s.color]);
    if (this.capacity) legend.push([`capacity ${this.format(this.capacity)}`, "#c0392b"]);
    for (const [name, color] of legend) {
      g.fillStyle = color;
      g.fillRect(lx, 5, 10, 3);
      g.fillStyle = "#1d1f21";
      g.fillText(name, lx + 14, 7);
      lx += g.measureText(name).width + 30;
    }
  }
}

// Tick values from 0 to a round number at or above `v`: four or five
// steps of 1, 2 or 5 times a power of ten.
function niceTicks(v) {
  if (!(v > 0)) return [0, 1];
  const raw = v / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  const ticks = [];
  for (let t = 0; t < v + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1] < v) ticks.push(Number((ticks.length * step).toPrecision(12)));
  return ticks;
}

// ---------------------------------------------------------------- metrics

// Prometheus text exposition: `name{a="x",b="y"} value` lines; comments
// and blank lines skipped. Returns [{ name, labels, value }].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    }
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// Per pipe: delivered bytes, dropped packets (all reasons), queued
// packets and bytes.
function pipeMetrics(samples) {
  const pipes = new Map();
  const get = (p) => {
    if (!pipes.has(p)) pipes.set(p, { deliveredBytes: 0, droppedPackets: 0, queuePackets: 0, queueBytes: 0 });
    return pipes.get(p);
  };
  for (const s of samples) {
    const p = s.labels.pipe;
    if (p === undefined) continue;
    switch (s.name) {
      case "dummynet_pipe_delivered_bytes_total": get(p).deliveredBytes += s.value; break;
      case "dummynet_pipe_dropped_packets_total": get(p).droppedPackets += s.value; break;
      case "dummynet_pipe_queue_packets": get(p).queuePackets += s.value; break;
      case "dummynet_pipe_queue_bytes": get(p).queueBytes += s.value; break;
    }
  }
  return pipes;
}

// ---------------------------------------------------------------- state

const state = {
  pipes: new Map(), // number (string) -> { card, charts, last, delays }
  lastMetrics: null, // { t, pipes }
  config: new Map(), // number (string) -> pipe JSON
  events: { received: 0, lost: 0, sampled: false },
  openIds: new Map(), // packet id -> arrival t_ns
  errors: 0,
};

// For tests and curious users: what the charts hold.
window.dummynetDashboard = {
  pipes: () =>
    [...state.pipes.entries()].map(([n, p]) => ({
      pipe: n,
      points: Object.fromEntries(Object.entries(p.charts).map(([k, c]) => [k, c.points()])),
      max: Object.fromEntries(
        Object.entries(p.charts).map(([k, c]) => [k, Math.max(0, ...c.data.flat().map(([, v]) => v))]),
      ),
    })),
  events: () => ({ ...state.events }),
  errors: () => state.errors,
};

function pipeEntry(n) {
  let p = state.pipes.get(n);
  if (p) return p;
  const card = document.getElementById("pipe-card").content.firstElementChild.cloneNode(true);
  card.dataset.pipe = n;
  card.querySelector("h3").textContent = `pipe ${n}`;
  const canvas = (k) => card.querySelector(`canvas[data-chart="${k}"]`);
  const charts = {
    throughput: new LineChart(canvas("throughput"), {
      format: fmtRate,
      series: [{ name: "delivered", color: "#1f6feb" }],
    }),
    queue: new LineChart(canvas("queue"), {
      format: (v) => `${trim(v)} pkt`,
      series: [{ name: "packets queued", color: "#8e44ad" }],
    }),
    delay: new LineChart(canvas("delay"), {
      format: fmtMs,
      series: [
        { name: "median", color: "#2e8540" },
        { name: "max", color: "#d68910", dash: [3, 3] },
      ],
    }),
    drops: new LineChart(canvas("drops"), {
      format: (v) => `${trim(v)}/s`,
      series: [{ name: "dropped packets", color: "#c0392b" }],
    }),
  };
  // Cards in pipe order, whichever source names a pipe first.
  const after = [...state.pipes.keys()].map(Number).filter((k) => k > Number(n)).sort((a, b) => a - b)[0];
  const container = document.getElementById("pipes");
  container.insertBefore(card, after === undefined ? null : state.pipes.get(String(after)).card);
  p = { card, charts, delays: [] };
  state.pipes.set(n, p);
  return p;
}

// ---------------------------------------------------------------- polling

// A daemon listening beyond loopback asks for its bearer token
// (--http-token): the page asks for it once and keeps it for the tab.
function authHeaders(extra = {}) {
  const token = sessionStorage.getItem("dummynet-token");
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function request(path, init = {}) {
  const r = await fetch(path, { ...init, headers: authHeaders(init.headers || {}) });
  if (r.status === 401) {
    const token = window.prompt("This dummynet daemon wants its API token (--http-token):");
    if (token) sessionStorage.setItem("dummynet-token", token.trim());
    throw new Error(`${path}: unauthorized`);
  }
  return r;
}

async function getJson(path) {
  const r = await request(path, { headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

async function pollMetrics(now) {
  const r = await request("/metrics");
  if (!r.ok) throw new Error(`/metrics: HTTP ${r.status}`);
  const pipes = pipeMetrics(parseMetrics(await r.text()));
  const last = state.lastMetrics;
  for (const [n, m] of pipes) {
    const p = pipeEntry(n);
    p.charts.queue.push(0, now, m.queuePackets);
    const prev = last && last.pipes.get(n);
    if (prev) {
      const dt = now - last.t;
      if (dt > 0) {
        p.charts.throughput.push(0, now, Math.max(0, ((m.deliveredBytes - prev.deliveredBytes) * 8) / dt));
        p.charts.drops.push(0, now, Math.max(0, (m.droppedPackets - prev.droppedPackets) / dt));
      }
    }
    // Queueing delay of the packets whose departures arrived since the
    // last poll.
    if (p.delays.length) {
      const d = p.delays.sort((a, b) => a - b);
      p.charts.delay.push(0, now, d[Math.floor((d.length - 1) / 2)] / 1e6);
      p.charts.delay.push(1, now, d[d.length - 1] / 1e6);
      p.delays = [];
    }
  }
  state.lastMetrics = { t: now, pipes };
}

async function pollStats() {
  const s = await getJson("/v1/stats");
  for (const el of document.querySelectorAll("[data-total]")) {
    el.textContent = fmtCount(s.totals && s.totals[el.dataset.total]);
  }
  const l = s.lateness_ns || {};
  document.getElementById("lateness").textContent = `${fmtNs(l.p50)} / ${fmtNs(l.p99)} / ${fmtNs(l.max)}`;
}

async function pollPipes() {
  const j = await getJson("/v1/pipes");
  const list = Array.isArray(j) ? j : j.pipes || [];
  const body = document.querySelector("#pipe-table tbody");
  body.replaceChildren();
  document.getElementById("pipes-empty").hidden = list.length > 0;
  for (const pipe of list) {
    const n = String(pipe.number);
    state.config.set(n, pipe);
    const p = pipeEntry(n);
    const link = pipe.link || {};
    p.charts.throughput.capacity = link.bandwidth_bps || null;
    // Its role, when the daemon knows one (a shell's pipe 1 is "up: from
    // the command").
    const role = pipe.role ? ` (${pipe.role})` : "";
    p.card.querySelector("h3").textContent =
      `pipe ${n}${role}: ${link.bandwidth_bps ? fmtRate(link.bandwidth_bps) : "unlimited"}, ${fmtNs(link.delay_ns || 0)} delay`;
    const flows = (pipe.queue && pipe.queue.flows) || [];
    const sum = (k) => flows.reduce((a, f) => a + (f[k] || 0), 0);
    const q = pipe.queue || {};
    const limit = q.limit_bytes ? `${fmtCount(q.limit_bytes)} B` : q.limit_packets ? `${q.limit_packets} slots` : "–";
    const row = document.createElement("tr");
    for (const text of [
      pipe.role ? `${n} (${pipe.role})` : n,
      link.bandwidth_bps ? fmtRate(link.bandwidth_bps) : "unlimited",
      fmtNs(link.delay_ns || 0),
      limit,
      fmtCount(sum("total_packets") - sum("dropped_packets")),
      fmtCount(sum("dropped_packets")),
      fmtCount(sum("queued_packets")),
    ]) {
      const td = document.createElement("td");
      td.textContent = text;
      row.appendChild(td);
    }
    body.appendChild(row);
  }
}

async function pollRules() {
  const j = await getJson("/v1/rules");
  const list = Array.isArray(j) ? j : j.rules || [];
  const body = document.querySelector("#rule-table tbody");
  body.replaceChildren();
  for (const r of list) {
    const row = document.createElement("tr");
    const cells = [String(r.number).padStart(5, "0"), fmtCount(r.packets), fmtCount(r.bytes), r.rule || r.text || ""];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (i === 3) td.className = "body";
      row.appendChild(td);
    });
    body.appendChild(row);
  }
}

async function tick() {
  const now = Date.now() / 1000;
  const status = document.getElementById("status");
  try {
    await Promise.all([pollMetrics(now), pollStats(), pollPipes(), pollRules()]);
    status.dataset.state = "live";
    status.textContent = "live";
  } catch (e) {
    state.errors++;
    status.dataset.state = "error";
    status.textContent = String(e.message || e);
  }
  for (const p of state.pipes.values()) for (const c of Object.values(p.charts)) c.draw(now);
}

// ---------------------------------------------------------------- events

// Server-Sent Events read with fetch rather than EventSource, so that the
// bearer token can travel in a header. A dropped stream is reopened after
// a pause.
async function listenEvents() {
  for (;;) {
    try {
      const r = await request("/v1/events", { headers: { Accept: "text/event-stream" } });
      if (!r.ok || !r.body) throw new Error(`/v1/events: HTTP ${r.status}`);
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trimStart())
            .join("\n");
          if (data) onEvent(data);
        }
      }
    } catch (e) {
      state.events.error = String(e.message || e);
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function onEvent(data) {
  let ev;
  try {
    ev = JSON.parse(data);
  } catch {
    return;
  }
  state.events.received++;
  if (ev.event === "arrival") {
    if (state.openIds.size >= MAX_OPEN_IDS) state.openIds.delete(state.openIds.keys().next().value);
    state.openIds.set(ev.id, ev.t_ns);
  } else if (ev.event === "departure" || ev.event === "drop" || ev.event === "forward") {
    // A packet leaves a pipe by departing, or, crossing a bridge (a
    // shell's link is one), by the `forward` that ends its `in` pass; its
    // `out` pass then departs without a pipe.
    const t0 = state.openIds.get(ev.id);
    if (ev.event !== "forward") state.openIds.delete(ev.id);
    if (ev.event !== "drop" && ev.pipe !== undefined && t0 !== undefined && ev.t_ns >= t0) {
      pipeEntry(String(ev.pipe)).delays.push(ev.t_ns - t0);
    }
  } else if (ev.event === "lost") {
    // The daemon's word that it shed events to keep up.
    state.events.lost += ev.count || 0;
    state.events.sampled = true;
  }
  document.getElementById("events-note").textContent = state.events.sampled
    ? `events: ${fmtCount(state.events.received)} received, ${fmtCount(state.events.lost)} shed by the daemon (delay is a sample)`
    : `events: ${fmtCount(state.events.received)} received`;
}

// ---------------------------------------------------------------- form

document.getElementById("commands-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const out = document.getElementById("commands-result");
  const commands = document
    .getElementById("commands")
    .value.split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  if (!commands.length) return;
  try {
    const r = await request("/v1/commands", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ commands }),
    });
    const j = await r.json().catch(() => ({}));
    out.dataset.ok = String(r.ok);
    out.textContent = r.ok
      ? `applied ${commands.length} command${commands.length > 1 ? "s" : ""}`
      : (j.error && j.error.message) || `HTTP ${r.status}`;
    if (r.ok) tick();
  } catch (err) {
    out.dataset.ok = "false";
    out.textContent = String(err);
  }
});

listenEvents();
tick();
setInterval(tick, POLL_MS);
