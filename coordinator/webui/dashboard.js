// rlfleet live dashboard: polls GET /v1/dashboard for what it lacks and draws it on canvases.
// No library and nothing from outside this origin: the page must work on a machine without internet.
"use strict";

const POLL_MS = 2000;
const KEEP_ROWS = 5000;
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#57606a"];
const state = { boot: null, since: 0, evaluationsSince: 0, testsSince: 0, rows: [], columns: [],
                evaluations: [], tests: [], snapshot: null, threshold: null, timer: null };
const $ = (id) => document.getElementById(id);

// ----- the token: from the URL fragment once, then sessionStorage; only ever sent as a header -------------
function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("rlfleet-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);  // out of the address bar and the history
  }
}

function token() { return sessionStorage.getItem("rlfleet-token"); }

function showNotice(text) {
  const notice = $("notice");
  notice.textContent = text;
  notice.hidden = !text;
}

function askForToken(message) {
  clearTimeout(state.timer);
  showNotice(message);
  $("board").hidden = true;
  $("login").hidden = false;
  $("forget").hidden = true;
  $("run-state").textContent = "no access";
  $("run-state").className = "state";
  $("token").focus();
}

// ----- polling -------------------------------------------------------------------------------------------
async function poll() {  // whatever goes wrong, the page says so and keeps polling
  try {
    await pollOnce();
  } catch (err) {
    showNotice("Could not show the coordinator's reply (" + err.message + "); retrying every few seconds.");
    state.timer = setTimeout(poll, POLL_MS * 2);
  }
}

async function pollOnce() {
  const params = new URLSearchParams({ since: state.since, evaluations_since: state.evaluationsSince,
                                       tests_since: state.testsSince });
  if (state.boot) params.set("boot", state.boot);
  const headers = {};
  if (token()) headers.Authorization = "Bearer " + token();
  let response;
  try {
    response = await fetch("/v1/dashboard?" + params, { headers, cache: "no-store" });
  } catch (err) {
    showNotice("The coordinator does not answer (" + err.message + "); retrying every few seconds.");
    state.timer = setTimeout(poll, POLL_MS * 2);
    return;
  }
  if (response.status === 401) {
    const known = token();
    sessionStorage.removeItem("rlfleet-token");
    askForToken(known ? "The coordinator refused this token (401): it is not one of this run's tokens. "
                        + "Enter a token from the run's tokens file."
                      : "This dashboard needs a token of the run (401): enter one below, or open the page as "
                        + "/#token=… .");
    return;
  }
  if (!response.ok) {
    showNotice("The coordinator answered " + response.status + ": " + (await response.text()).slice(0, 300));
    state.timer = setTimeout(poll, POLL_MS * 2);
    return;
  }
  const update = await response.json();
  showNotice("");
  absorb(update);
  render();
  state.timer = setTimeout(poll, update.more ? 0 : POLL_MS);
}

function absorb(update) {
  if (update.boot !== state.boot) {  // a new coordinator process: its rows start over
    state.rows = []; state.evaluations = []; state.tests = [];
    state.boot = update.boot;
  }
  state.columns = update.columns;
  state.rows.push(...update.rows);
  if (state.rows.length > KEEP_ROWS) state.rows.splice(0, state.rows.length - KEEP_ROWS);
  state.evaluations.push(...update.evaluations);
  state.tests.push(...update.tests);
  state.since = update.seq;
  state.evaluationsSince = update.evaluations_next;
  state.testsSince = update.tests_next;
  state.threshold = update.solve_threshold;
  if (update.snapshot) state.snapshot = update.snapshot;
}

// ----- rendering -----------------------------------------------------------------------------------------
function render() {
  $("login").hidden = true;
  $("board").hidden = false;
  $("forget").hidden = !token();
  const snap = state.snapshot;
  if (snap) {
    $("run-name").textContent = snap.run_name;
    $("run-state").textContent = snap.run_state;
    $("run-state").className = "state " + snap.run_state;
    $("run-state").dataset.wall = String(snap.wall_seconds);
    $("run-message").textContent = snap.run_message;
    renderNumbers(snap);
    renderWorkers(snap);
  }
  const col = Object.fromEntries(state.columns.map((name, i) => [name, i]));
  const rows = state.rows;
  const pick = (x, y) => rows.filter((r) => r[col[y]] !== null).map((r) => [r[col[x]], r[col[y]]]);
  const evals = (x) => state.evaluations.map((e) => [e[x], e[3]]);
  const tests = (x) => state.tests.map((t) => [t[x], t[3]]);
  const threshold = state.threshold;
  const returns = (x, axis) => [  // data-points-training etc. let tests count what each curve shows
    { key: "Training", name: "training (last 100 episodes)", points: pick(axis, "recent_return_mean") },
    { key: "Validation", name: "validation", points: evals(x), dots: true },
    { key: "Test", name: "held-out test", points: tests(x), dots: true }];
  lineChart($("returns-time"), returns(0, "wall_seconds"), { threshold });
  lineChart($("returns-steps"), returns(1, "env_steps"), { threshold });
  lineChart($("sps"), [{ name: "env steps/s", points: pick("wall_seconds", "env_steps_per_second") }], {});
  const names = new Set();
  rows.forEach((r) => Object.keys(r[col.losses] || {}).forEach((n) => names.add(n)));
  lineChart($("losses"), [...names].sort().map((n) => ({
    name: n, points: rows.filter((r) => r[col.losses] && n in r[col.losses]).map((r) => [r[col.env_steps],
                                                                                         r[col.losses][n]]) })), {});
  lineChart($("buffer"), [{ name: "buffer fill %", points: pick("wall_seconds", "buffer_fill")
    .map(([x, y]) => [x, 100 * y]) }], {});
  const target = snap && snap.buffers.length ? snap.buffers[0].samples_per_insert : null;
  lineChart($("spi"), [{ name: "samples per insert (achieved)", points: pick("wall_seconds", "samples_per_insert") }],
            { threshold: target });
  if (snap) barChart($("lag"), snap.policy_lag.ingest_histogram);
}

function number(label, value) {
  const box = document.createElement("div");
  const b = document.createElement("b");
  b.textContent = value;
  box.append(b, label);
  return box;
}

function fmt(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toLocaleString(undefined,
    { maximumFractionDigits: digits });
}

function returnText(value) {  // a return as shared/solve_rule.py's shown(): POPGym's -0.414 must not read -0.4
  if (value === null || value === undefined) return "–";
  const v = Number(value);
  return Math.abs(v) >= 10 ? v.toFixed(1) : String(Number(v.toPrecision(3)));
}

function renderNumbers(snap) {
  const buffer = snap.buffers[0] || {};
  const best = snap.best_evaluation;
  const confirmed = snap.confirmed_by;
  $("numbers").replaceChildren(
    number("env steps", fmt(snap.env_steps, 0)),
    number("env steps/s", fmt(snap.env_steps_per_second, 0)),
    number("episodes", fmt(snap.episodes, 0)),
    number("training return (last 100)", returnText(snap.recent_return_mean)),
    number("policy version", fmt(snap.policy_version, 0)),
    number("learner iteration", fmt(snap.learner.iteration, 0)),
    number("best validation", best ? returnText(best.mean) + " (v" + best.policy_version + ")" : "–"),
    number("solve rule", ruleText(snap.solve_rule, state.threshold)),
    number("latest test", snap.latest_test ? testText(snap.latest_test) : "–"),
    number("confirmed by test", confirmed ? testText(confirmed) : "–"),
    number("buffer", fmt(buffer.transitions, 0) + " / " + fmt(buffer.capacity_transitions, 0)),
    number("samples per insert", fmt(snap.learner.samples_per_insert, 2) + " (target "
           + fmt(buffer.samples_per_insert, 2) + ")"),
    number("wall time (s)", fmt(snap.wall_seconds, 0)),
    number("coordinator resumes", fmt(snap.coordinator_resumes, 0)),
    ...selfPlayNumbers(snap.self_play));
}

function ruleText(rule, threshold) {  // how a held-out test confirms a solve (shared/solve_rule.py)
  if (rule === "against") return "every bar of evaluation.against";
  return "95% lower bound of a re-test's mean ≥ " + returnText(threshold);
}

function testText(test) {  // mean [95% t interval], and the re-test bound the rule compared with the threshold
  const bound = test.bound === null || test.bound === undefined ? "" : ", bound " + returnText(test.bound);
  return returnText(test.mean) + " [" + returnText(test.ci95[0]) + ", " + returnText(test.ci95[1]) + "]" + bound
         + " (v" + test.policy_version + (test.confirmed ? "" : ", rejected") + ")";
}

function selfPlayNumbers(play) {  // a self-play run: ratings and the opponent pool (null for other runs)
  if (!play) return [];
  const pool = play.pool_versions;
  return [
    number("Elo, latest / best (random = 0)", fmt(play.latest_elo, 0) + " / " + fmt(play.best_elo, 0)),
    number("opponent pool", pool.length ? "v" + pool[0] + " .. v" + pool[pool.length - 1]
                                          + " (" + pool.length + ")" : "–")];
}

function renderWorkers(snap) {
  const col = Object.fromEntries(snap.worker_columns.map((name, i) => [name, i]));
  const body = document.createElement("tbody");
  for (const w of snap.workers) {
    const tr = body.insertRow();
    const error = w[col.last_error] || (w[col.flagged] ? "flagged: too many corrupt payloads" : "");
    const cells = [w[col.worker_id], w[col.kind], w[col.name], w[col.task_id] || "–",
                   fmt(w[col.last_seen_seconds_ago]), w[col.restarts], w[col.corrupt_chunks], error];
    cells.forEach((value, i) => {
      const td = tr.insertCell();
      td.textContent = value;  // worker names and errors come from clients: text, never markup
      if (i === cells.length - 1 && value) td.className = "error";
    });
  }
  $("workers").tBodies[0].replaceWith(body);
  $("worker-count").textContent = "(" + snap.workers.length + ")";
}

// ----- charts: a line chart and a bar chart on canvas ----------------------------------------------------
function surface(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth, height = canvas.clientHeight;
  canvas.width = width * ratio; canvas.height = height * ratio;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  return { ctx, width, height };
}

function ticks(low, high, count) {
  const step0 = (high - low) / count;
  const magnitude = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= step0);
  const out = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) out.push(t);
  return out;
}

function label(value, step) {  // as many decimals as the tick step needs: 14.2k, 14.4k rather than 14k, 14k
  const abs = Math.abs(value);
  const [scale, suffix] = abs >= 1e6 ? [1e6, "M"] : abs >= 1e4 ? [1e3, "k"] : [1, ""];
  const decimals = Math.min(6, Math.max(0, -Math.floor(Math.log10(step / scale) + 1e-9)));
  return (value / scale).toFixed(decimals) + suffix;
}

function lineChart(canvas, series, { threshold = null }) {
  const { ctx, width, height } = surface(canvas);
  const pad = { left: 46, right: 8, top: 18, bottom: 20 };
  const all = series.flatMap((s) => s.points);
  canvas.dataset.points = String(series.reduce((n, s) => n + s.points.length, 0));
  series.forEach((s) => { if (s.key) canvas.dataset["points" + s.key] = String(s.points.length); });
  if (!all.length) {
    ctx.fillStyle = "#57606a";
    ctx.fillText("no data yet", width / 2 - 25, height / 2);
    return;
  }
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  const ys = all.map((p) => p[1]).concat(threshold === null ? [] : [threshold]);
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const X = (x) => pad.left + (x - x0) / (x1 - x0) * (width - pad.left - pad.right);
  const Y = (y) => height - pad.bottom - (y - y0) / (y1 - y0) * (height - pad.top - pad.bottom);
  ctx.strokeStyle = "#e4e6ea"; ctx.fillStyle = "#57606a"; ctx.lineWidth = 1;
  const yTicks = ticks(y0, y1, 4), xTicks = ticks(x0, x1, 5);
  for (const t of yTicks) {
    ctx.beginPath(); ctx.moveTo(pad.left, Y(t)); ctx.lineTo(width - pad.right, Y(t)); ctx.stroke();
    ctx.fillText(label(t, yTicks[1] - yTicks[0] || 1), 2, Y(t) + 4);
  }
  for (const t of xTicks) ctx.fillText(label(t, xTicks[1] - xTicks[0] || 1), X(t) - 10, height - 5);
  if (threshold !== null) {
    ctx.setLineDash([4, 4]); ctx.strokeStyle = "#9a6700";
    ctx.beginPath(); ctx.moveTo(pad.left, Y(threshold)); ctx.lineTo(width - pad.right, Y(threshold)); ctx.stroke();
    ctx.setLineDash([]);
  }
  let legendX = pad.left;
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    ctx.strokeStyle = color; ctx.fillStyle = color; ctx.lineWidth = 1.5;
    if (s.dots) {
      s.points.forEach(([x, y]) => { ctx.beginPath(); ctx.arc(X(x), Y(y), 2.5, 0, 2 * Math.PI); ctx.fill(); });
    } else {
      ctx.beginPath();
      s.points.forEach(([x, y], j) => (j ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
      ctx.stroke();
    }
    ctx.fillRect(legendX, 5, 10, 8);
    ctx.fillText(s.name, legendX + 13, 13);
    legendX += ctx.measureText(s.name).width + 26;
  });
}

function barChart(canvas, histogram) {
  const { ctx, width, height } = surface(canvas);
  const entries = Object.entries(histogram);
  canvas.dataset.points = String(entries.length);
  if (!entries.length) { ctx.fillStyle = "#57606a"; ctx.fillText("no chunks yet", width / 2 - 30, height / 2); return; }
  const top = Math.max(...entries.map(([, n]) => n));
  const slot = (width - 20) / entries.length;
  entries.forEach(([lag, n], i) => {
    const h = n / top * (height - 50);
    ctx.fillStyle = "#0969da";
    ctx.fillRect(10 + i * slot + 4, height - 20 - h, slot - 8, h);
    ctx.fillStyle = "#1d2330";
    ctx.fillText(lag, 10 + i * slot + slot / 2 - 4, height - 6);
    ctx.fillText(String(n), 10 + i * slot + slot / 2 - 8, height - 24 - h);
  });
}

// ----- start ---------------------------------------------------------------------------------------------
document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromFragment();
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("rlfleet-token", $("token").value.trim());
    $("token").value = "";
    poll();
  });
  $("forget").addEventListener("click", () => { sessionStorage.removeItem("rlfleet-token"); location.reload(); });
  window.addEventListener("hashchange", () => {  // a new token: start over, so only one poll loop runs
    if (/token=/.test(location.hash)) { takeTokenFromFragment(); location.reload(); }
  });
  window.addEventListener("resize", render);
  poll();
});
