// The operators' console: a thin client of the admin API (/admin/...). It keeps the admin token in
// sessionStorage (gone when the tab closes) and sends it as a bearer token; the server checks it.
"use strict";

const TOKEN_KEY = "tandem-admin-token";
const MODES = ["block", "verified", "ar"];
const COLORS = { block: "#2f6fde", verified: "#8e44ad", ar: "#e67e22" };
const POLL_MS = { decisions: 1000, stats: 3000, policy: 5000 };
const MAX_ENTRIES = 500; // as many as the gateway's feed keeps
const MAX_ROWS = 200;
const THROUGHPUT_WINDOW_S = 10;

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  lastByFeed: {}, entries: [],
  policy: null, liveVersion: null, loadedText: "", history: [],
  validateTimer: null, validated: null, timers: [], charts: {},
};

// ---- the admin API -----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function api(path, body) {
  const init = { headers: { Authorization: `Bearer ${state.token}` } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    setConnection(false);
    throw err;
  }
  setConnection(true);
  const data = await response.json().catch(() => null);
  if (response.status === 401) signOut("The server refused this token.");
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function setConnection(ok) {
  const badge = $("connection");
  badge.textContent = ok ? "live" : "unreachable";
  badge.className = "badge " + (ok ? "ok" : "down");
}

// ---- sign in / out -----------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  state.token = $("token").value.trim();
  $("login-error").textContent = "";
  try {
    await api("/admin/stats");
  } catch (err) {
    $("login-error").textContent = err.status === 401 ? "Wrong admin token." : `Cannot reach the admin API: ${err.message}`;
    state.token = null;
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, state.token);
  start();
}

function signOut(message) {
  state.timers.forEach(clearInterval);
  state.timers = [];
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  $("console-view").hidden = true;
  $("login-view").hidden = false;
  $("login-error").textContent = message || "";
}

function start() {
  $("login-view").hidden = true;
  $("console-view").hidden = false;
  makeCharts();
  const every = (fn, ms) => { fn(); state.timers.push(setInterval(fn, ms)); };
  every(pollDecisions, POLL_MS.decisions);
  every(pollStats, POLL_MS.stats);
  every(pollPolicy, POLL_MS.policy);
}

// ---- live decisions ----------------------------------------------------------------------------

async function pollDecisions() {
  // Each poll reaches one gateway replica; entries are merged across replicas by (feed, seq).
  const after = Object.entries(state.lastByFeed).map(([feed, seq]) => `${feed}:${seq}`).join(",");
  let data;
  try {
    data = await api(`/admin/decisions?after=${encodeURIComponent(after)}`);
  } catch { return; }
  if (!(data.feed in state.lastByFeed)) state.lastByFeed[data.feed] = 0;
  const fresh = data.decisions.filter((d) => d.seq > state.lastByFeed[data.feed]);
  state.lastByFeed[data.feed] = Math.max(state.lastByFeed[data.feed], data.last);
  $("replica").textContent = Object.keys(state.lastByFeed).length;
  if (!fresh.length) return;
  fresh.forEach((d) => { d.feed = data.feed; });
  state.entries = state.entries.concat(fresh).sort((a, b) => a.ts - b.ts).slice(-MAX_ENTRIES);
  renderDecisions(new Set(fresh));
  updateCharts();
}

const round = (x) => (x === null || x === undefined ? null : Math.round(x));

function cell(row, text, cls, title) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "–" : String(text);
  if (cls) td.className = cls;
  if (title) td.title = title;
  return td;
}

function renderDecisions(fresh) {
  const body = $("decisions").tBodies[0];
  body.textContent = "";
  $("decisions-empty").hidden = state.entries.length > 0;
  for (const d of state.entries.slice(-MAX_ROWS).reverse()) {
    const row = body.insertRow();
    row.dataset.requestId = d.request_id;
    row.dataset.mode = d.mode;
    if (fresh.has(d)) row.className = "fresh";
    cell(row, new Date(d.ts * 1000).toLocaleTimeString());
    cell(row, d.request_id.slice(-12), "mono", d.request_id);
    const served = d.mode === d.routed_mode ? d.mode : `${d.routed_mode} → ${d.mode}`;
    cell(row, served + (d.degraded ? " (degraded)" : ""), `mode ${d.mode}`);
    cell(row, `${d.task} (${Math.round(d.confidence * 100)}%)`);
    cell(row, d.rule, "", d.trace ? `trace: ${d.trace.join(" → ")}` : null);  // how the route came about, on hover
    cell(row, d.policy_version, "num");
    cell(row, d.reason, "reason");
    cell(row, round(d.latency_ms), "num");
    cell(row, round(d.estimate_ms), "num");
    cell(row, d.output_tokens, "num");
    cell(row, d.tokens_per_forward, "num");
    cell(row, d.acceptance === null || d.acceptance === undefined ? null : `${Math.round(d.acceptance * 100)}%`, "num");
    cell(row, d.status === 200 ? "200" : `${d.status} ${d.error || ""}`, d.status === 200 ? "" : "status-error");
  }
}

// ---- charts (uPlot) ----------------------------------------------------------------------------

function chartOptions(el, yLabel, points, log) {
  return {
    width: Math.max(320, el.clientWidth), height: 220,
    scales: { x: { time: true }, y: log ? { distr: 3, log: 10 } : { auto: true } },
    axes: [{}, { label: yLabel, size: 60 }],
    series: [{}].concat(MODES.map((m) => ({
      label: m, stroke: COLORS[m], width: points ? 0 : 2, spanGaps: !points,
      points: { show: points, size: 6, fill: COLORS[m] },
      paths: points ? () => null : undefined,
    }))),
  };
}

function makeCharts() {
  if (state.charts.latency) return;
  const make = (id, label, points, log) => {
    const el = $(id);
    return new uPlot(chartOptions(el, label, points, log), [[], [], [], []], el);
  };
  state.charts.latency = make("chart-latency", "ms", true, false);
  state.charts.throughput = make("chart-throughput", "tokens/s", false, false);
  state.charts.calibration = make("chart-calibration", "observed / estimated", true, true);
  window.addEventListener("resize", () => {
    for (const [name, chart] of Object.entries(state.charts)) {
      chart.setSize({ width: Math.max(320, $(`chart-${name}`).clientWidth), height: 220 });
    }
  });
}

function perRequestSeries(value) {
  const ok = state.entries.filter((d) => d.status === 200);
  return [ok.map((d) => d.ts)].concat(MODES.map((m) => ok.map((d) => (d.mode === m ? value(d) : null))));
}

function throughputSeries() {
  const ok = state.entries.filter((d) => d.status === 200);
  if (!ok.length) return [[], [], [], []];
  const w = THROUGHPUT_WINDOW_S;
  const first = Math.floor(ok[0].ts / w) * w;
  const last = Math.floor(ok[ok.length - 1].ts / w) * w;
  const xs = [];
  for (let t = first - w; t <= last; t += w) xs.push(t); // from the quiet window before the first request
  const sums = MODES.map(() => xs.map(() => 0));
  for (const d of ok) sums[MODES.indexOf(d.mode)][Math.floor((d.ts - first) / w) + 1] += d.output_tokens / w;
  return [xs].concat(sums);
}

function updateCharts() {
  const estimated = state.entries.some((d) => d.estimate_ms > 0);
  if (estimated && $("chart-calibration").hidden) {
    $("calibration-empty").hidden = true;
    $("chart-calibration").hidden = false;
    state.charts.calibration.setSize({ width: Math.max(320, $("chart-calibration").clientWidth), height: 220 });
  }
  state.charts.latency.setData(perRequestSeries((d) => d.latency_ms));
  state.charts.throughput.setData(throughputSeries());
  state.charts.calibration.setData(perRequestSeries((d) => (d.estimate_ms > 0 ? d.latency_ms / d.estimate_ms : null)));
}

// ---- stats -------------------------------------------------------------------------------------

async function pollStats() {
  let s;
  try { s = await api("/admin/stats"); } catch { return; }
  const modes = $("modes").tBodies[0];
  modes.textContent = "";
  for (const [mode, m] of Object.entries(s.modes)) {
    const row = modes.insertRow();
    cell(row, mode, `mode ${mode}`);
    cell(row, m.requests, "num"); cell(row, m.latency_ms_p50, "num"); cell(row, m.latency_ms_p99, "num");
    cell(row, m.tokens_per_forward_mean, "num");
  }
  const errors = Object.entries(s.errors).map(([k, v]) => `${v} × ${k}`).join(", ") || "none";
  const pct = (x) => (x === null ? "–" : `${Math.round(x * 100)}%`);
  $("totals").textContent = `errors: ${errors} · degraded: ${s.degraded} · verified acceptance: ${pct(s.acceptance_rate)}` +
    ` · shadow acceptance: ${pct(s.shadow_acceptance_rate)} · decisions log: ${s.decisions_log.written} written, ` +
    `${s.decisions_log.dropped} dropped · block backlog ${s.routing.block_backlog_ms} ms`;
  const calibration = $("calibration").tBodies[0];
  calibration.textContent = "";
  const factors = Object.entries(s.routing.calibration).map(([e, f]) => [`${e} engine`, f])
    .concat(Object.entries(s.routing.calibration_by_task));
  for (const [name, factor] of factors) {
    const row = calibration.insertRow();
    cell(row, name); cell(row, factor, "num");
  }
}

// ---- the policy: view, validate as you type, apply with compare-and-set ------------------------

function policyText(policy) {
  const { version, ...content } = policy;
  return jsyaml.dump(content, { lineWidth: 120, noRefs: true });
}

async function pollPolicy() {
  let data;
  try { data = await api("/admin/policy"); } catch { return; }
  setLive(data.policy.version);
  $("policy-store").textContent = `(${data.store.store}: ${data.store.source}${data.store.healthy === false ? ", unhealthy" : ""})`;
  const editor = $("policy-editor");
  if (!state.policy || editor.value === state.loadedText) {
    if (!state.policy || state.policy.version !== data.policy.version) showPolicy(data.policy);
  } else if (data.policy.version !== state.policy.version && !$("policy-message").classList.contains("message-bad")) {
    message(`Version ${data.policy.version} was applied since you loaded version ${state.policy.version}; ` +
      "Reload to see it (your edits are kept until then).", false);
  }
  if (!state.history.length || state.history[0].version !== data.policy.version) await loadHistory();
}

function setLive(version) {
  state.liveVersion = version;
  $("policy-version").textContent = version;
}

function showPolicy(policy) {
  state.policy = policy;
  state.loadedText = policyText(policy);
  $("policy-editor").value = state.loadedText;
  setValidation("", "");
  $("policy-apply").disabled = true;
}

function setValidation(text, cls) {
  const el = $("policy-validation");
  el.textContent = text;
  el.className = "validation " + cls;
}

function message(text, ok) {
  const el = $("policy-message");
  el.textContent = text;
  el.className = ok ? "message-ok" : "message-bad";
}

function parseEditor() {
  const parsed = jsyaml.load($("policy-editor").value);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the policy must be a YAML mapping");
  return parsed;
}

function onEdit() {
  $("policy-apply").disabled = true;
  clearTimeout(state.validateTimer);
  state.validateTimer = setTimeout(validate, 300);
}

async function validate() {
  const text = $("policy-editor").value;
  if (text === state.loadedText) { setValidation("", ""); return; }
  let policy;
  try {
    policy = parseEditor();
  } catch (err) {
    setValidation(`YAML: ${err.message}`, "bad");
    return;
  }
  try {
    await api("/admin/policy/validate", { policy });
  } catch (err) {
    if ($("policy-editor").value === text) setValidation(err.message, "bad");
    return;
  }
  if ($("policy-editor").value !== text) return; // edited again meanwhile: that edit validates itself
  setValidation("Valid: Apply writes it as a new version.", "ok");
  $("policy-apply").disabled = false;
}

async function applyPolicy() {
  let policy;
  try { policy = parseEditor(); } catch (err) { setValidation(`YAML: ${err.message}`, "bad"); return; }
  $("policy-apply").disabled = true;
  try {
    const out = await api("/admin/policy", { policy, expect_version: state.policy.version, note: $("policy-note").value });
    message(`Applied: version ${out.version}.`, true);
    $("policy-note").value = "";
    setLive(out.version);
    showPolicy(out.policy);
    loadHistory();
  } catch (err) {
    if (err.status === 409) {
      pollPolicy(); // the live version and its history (the editor keeps the edit)
      message(`Refused, the policy changed meanwhile: ${err.message}. Your edits are still in the editor; ` +
        "Reload to start from the current version.", false);
    } else {
      message(`Refused: ${err.message}`, false);
      $("policy-apply").disabled = false;
    }
  }
}

async function reloadPolicy() {
  const data = await api("/admin/policy");
  setLive(data.policy.version);
  showPolicy(data.policy);
  message("", true);
  loadHistory();
}

// ---- history, diffs, rollback ------------------------------------------------------------------

function flatten(value, prefix, out) {
  if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out[prefix] = JSON.stringify(value);
  }
  return out;
}

function diff(before, after) {
  const a = flatten(before, "", {}), b = flatten(after, "", {});
  const keys = [...new Set(Object.keys(a).concat(Object.keys(b)))].sort();
  return keys.filter((k) => a[k] !== b[k]).map((k) => ({ path: k, old: a[k], new: b[k] }));
}

const shorten = (text) => (text.length > 48 ? text.slice(0, 45) + "..." : text);

async function loadHistory() {
  let data;
  try { data = await api("/admin/policy/history"); } catch { return; }
  const records = data.history.slice().sort((x, y) => y.version - x.version);
  state.history = records;
  const body = $("history").tBodies[0];
  body.textContent = "";
  const current = state.liveVersion;
  records.forEach((r, i) => {
    const row = body.insertRow();
    row.dataset.version = r.version;
    cell(row, r.version + (r.version === current ? " (live)" : ""));
    cell(row, r.applied_at ? new Date(r.applied_at * 1000).toLocaleString() : null);
    cell(row, r.note || "");
    const changes = row.insertCell();
    changes.className = "changes";
    const previous = records[i + 1];
    if (!previous) {
      changes.textContent = previous === undefined && r.version === records[records.length - 1].version ? "oldest kept" : "";
    } else {
      const d = diff(previous.policy, r.policy);
      if (!d.length) changes.textContent = "no change";
      for (const c of d) {
        const line = document.createElement("div");
        const oldSpan = document.createElement("span"), newSpan = document.createElement("span");
        oldSpan.className = "diff-old"; newSpan.className = "diff-new";
        oldSpan.textContent = shorten(c.old === undefined ? "(none)" : c.old);
        newSpan.textContent = shorten(c.new === undefined ? "(none)" : c.new);
        oldSpan.title = c.old === undefined ? "" : c.old;
        newSpan.title = c.new === undefined ? "" : c.new;
        line.append(`${c.path}: `, oldSpan, " → ", newSpan);
        changes.append(line);
      }
    }
    const actions = row.insertCell();
    if (r.version !== current) {
      const button = document.createElement("button");
      button.type = "button"; button.className = "quiet rollback"; button.textContent = "Roll back to this";
      button.addEventListener("click", () => rollback(r.version));
      actions.append(button);
    }
  });
}

async function rollback(version) {
  if (!confirm(`Roll the live policy back to version ${version}? It is written as a new version.`)) return;
  try {
    const out = await api("/admin/policy/rollback", { version, expect_version: state.policy.version });
    message(`Rolled back to version ${version}: now version ${out.version}.`, true);
    setLive(out.version);
    showPolicy(out.policy);
    loadHistory();
  } catch (err) {
    message(`Rollback refused: ${err.message}`, false);
  }
}

// ---- wiring ------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", signIn);
  $("logout").addEventListener("click", () => signOut(""));
  $("policy-editor").addEventListener("input", onEdit);
  $("policy-apply").addEventListener("click", applyPolicy);
  $("policy-reload").addEventListener("click", reloadPolicy);
  if (state.token) {
    api("/admin/stats").then(start, () => signOut(""));
  }
});
