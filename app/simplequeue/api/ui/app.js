// The simplequeue dashboard: a page over the service's own API (no other server, no CDN). The API
// key, when the service has keys, stays in this tab's sessionStorage and goes as a Bearer token.
"use strict";

const STATES = ["ready", "delayed", "retrying", "leased", "dead"];
const main = document.getElementById("main");
const banner = document.getElementById("banner");
let timer = null;

function key() { return sessionStorage.getItem("simplequeue-key") || ""; }

function showKey() {
  document.getElementById("key").placeholder = key() ? "key in use (replace)" : "admin key";
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  sessionStorage.setItem("simplequeue-key", input.value.trim());
  input.value = "";
  showKey();
  render();
});
showKey();

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (key()) headers["Authorization"] = `Bearer ${key()}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const code = data && data.error ? data.error : `HTTP ${response.status}`;
    const detail = data && data.detail ? data.detail : response.statusText;
    const error = new Error(`${code}: ${detail}`);
    error.status = response.status;
    error.code = code;
    throw error;
  }
  return data;
}

function say(message) {
  banner.textContent = message;
  banner.hidden = !message;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "onclick") node.addEventListener("click", value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

function when(text) { return text ? new Date(text).toLocaleString() : "—"; }

// --- activity: pushed / completed / failed / dead per bucket, drawn as SVG ----------------------

const SERIES = [
  { key: "pushed", label: "Pushed" },
  { key: "completed", label: "Completed" },
  { key: "failed", label: "Failed" },
  { key: "dead", label: "Dead" },
];
const SPANS = {
  "1h": { label: "Last hour", hours: 1, bucket: 60, tick: 600, per: "minute" },
  "24h": { label: "24 hours", hours: 24, bucket: 900, tick: 3 * 3600, per: "15 minutes" },
};
let span = sessionStorage.getItem("simplequeue-span") === "24h" ? "24h" : "1h";
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function activityPath(name) {
  const { hours, bucket } = SPANS[span];
  const since = new Date(Date.now() - hours * 3600 * 1000).toISOString();
  const base = name === null ? "/activity" : `/queues/${encodeURIComponent(name)}/activity`;
  return `${base}?since=${encodeURIComponent(since)}&bucket=${bucket}`;
}

// The activity, or the reason there is none to show (a key that does not cover every queue).
async function loadActivity(name) {
  try { return await api("GET", activityPath(name)); } catch (error) {
    if (error.status === 403) return { refused: error.message };
    throw error;
  }
}

function niceStep(rough) {
  const power = 10 ** Math.floor(Math.log10(rough));
  for (const m of [1, 2, 5, 10]) if (m * power >= rough) return Math.max(1, m * power);
  return power * 10;
}

function clock(date) {
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function chartSection(activity, title) {
  const switcher = el("div", { class: "spans", role: "group", "aria-label": "Time span" },
    ...Object.entries(SPANS).map(([id, s]) => el("button", {
      class: id === span ? "" : "secondary", "data-span": id, "aria-pressed": String(id === span),
      onclick: () => { span = id; sessionStorage.setItem("simplequeue-span", id); render(); },
    }, s.label)));
  const head = el("div", { class: "chart-head" }, el("h2", {}, title), switcher);
  if (activity.refused) {
    return el("section", { class: "chart" }, head, el("p", { class: "muted" }, "Activity of every queue together needs a key that covers every queue."));
  }
  const totals = Object.fromEntries(SERIES.map((s) => [s.key, activity.buckets.reduce((n, b) => n + b[s.key], 0)]));
  const legend = el("ul", { class: "legend" }, ...SERIES.map((s) => el("li", { "data-series": s.key },
    el("span", { class: `swatch s-${s.key}` }), `${s.label} `, el("strong", {}, totals[s.key]))));
  return el("section", { class: "chart" }, head, legend, drawChart(activity, totals),
    el("p", { class: "muted small" }, `Per ${SPANS[span].per}; pushed by creation time, failures of items since completed are not counted.`));
}

function drawChart(activity, totals) {
  const W = 960, H = 240, left = 46, right = 14, top = 12, bottom = 30;
  const plotW = W - left - right, plotH = H - top - bottom;
  const buckets = activity.buckets;
  const n = buckets.length;
  const peak = Math.max(0, ...buckets.flatMap((b) => SERIES.map((s) => b[s.key])));
  const step = niceStep(Math.max(peak, 4) / 4);
  const top_ = Math.max(step * Math.ceil(Math.max(peak, 1) / step), step);
  const x = (i) => left + (i + 0.5) * (plotW / n);
  const y = (v) => top + plotH - (v / top_) * plotH;
  const summary = SERIES.map((s) => `${s.label.toLowerCase()} ${totals[s.key]}`).join(", ");
  const chart = svg("svg", {
    id: "activity-chart", class: "activity", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `${SPANS[span].label}: ${summary}`, "data-buckets": String(n),
    ...Object.fromEntries(SERIES.map((s) => [`data-${s.key}`, String(totals[s.key])])),
  });
  const grid = svg("g", { class: "grid" });
  for (let v = 0; v <= top_; v += step) {
    grid.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v) }),
      svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, v));
  }
  const axis = svg("g", { class: "axis" }, svg("line", { x1: left, x2: W - right, y1: top + plotH, y2: top + plotH }));
  const tick = SPANS[span].tick * 1000;
  buckets.forEach((b, i) => {
    const start = new Date(b.start);
    if (start.getTime() % tick === 0) {
      axis.append(svg("line", { x1: x(i) - plotW / n / 2, x2: x(i) - plotW / n / 2, y1: top + plotH, y2: top + plotH + 5 }),
        svg("text", { x: x(i) - plotW / n / 2, y: H - 8, "text-anchor": "middle" }, clock(start)));
    }
  });
  const lines = SERIES.map((s) => svg("polyline", {
    class: `line s-${s.key}`, "data-series": s.key, fill: "none",
    points: buckets.map((b, i) => `${x(i).toFixed(1)},${y(b[s.key]).toFixed(1)}`).join(" "),
  }));
  // One column per bucket: hovering it tells the bucket's counts.
  const hover = svg("g", { class: "hover" }, ...buckets.map((b, i) => svg("rect", {
    x: left + i * (plotW / n), y: top, width: plotW / n, height: plotH,
  }, svg("title", {}, `${clock(new Date(b.start))}: ${SERIES.map((s) => `${s.label.toLowerCase()} ${b[s.key]}`).join(", ")}`))));
  chart.append(grid, axis, ...lines, hover);
  if (peak === 0) chart.append(svg("text", { x: left + plotW / 2, y: top + plotH / 2, class: "empty", "text-anchor": "middle" }, "No activity in this span"));
  return chart;
}

function notFound(show, what) {
  show(
    el("p", {}, el("a", { href: "#/" }, "← Queues")),
    el("h1", { id: "not-found" }, `${what} not found`),
    el("p", { class: "muted" }, `There is no ${what.toLowerCase()} by that name (it may have been deleted).`));
}

async function queuesPage(show) {
  const [{ queues }, activity] = await Promise.all([api("GET", "/queues"), loadActivity(null)]);
  const rows = queues.map((q) => el("tr", { class: "link", "data-queue": q.name, onclick: () => { location.hash = `#/queues/${encodeURIComponent(q.name)}`; } },
    el("td", {}, el("strong", {}, q.name), " ", el("span", { class: `badge ${q.paused ? "paused" : "live"}` }, q.paused ? "paused" : "live")),
    el("td", { class: "num" }, q.ready), el("td", { class: "num" }, q.leased), el("td", { class: "num" }, q.delayed),
    el("td", { class: "num" }, q.retrying), el("td", { class: `num ${q.dead ? "dead" : ""}` }, q.dead),
    el("td", { class: "num" }, age(q.oldest_ready_age_seconds)),
    el("td", { class: "num" }, q.history.completed)));
  show(
    el("h1", {}, "Queues"),
    el("p", { class: "muted" }, `${queues.length} queue${queues.length === 1 ? "" : "s"}; refreshed every 5 seconds.`),
    chartSection(activity, "All queues"),
    queues.length === 0 ? el("p", {}, "No queue yet: push an item and it appears here.") :
      el("table", { id: "queues" },
        el("thead", {}, el("tr", {}, el("th", {}, "Queue"), ...["Ready", "Leased", "Delayed", "Retrying", "Dead", "Oldest ready", "Completed"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, rows)));
}

async function queuePage(show, name, state) {
  const [q, items, activity] = await Promise.all([
    api("GET", `/queues/${encodeURIComponent(name)}`),
    state === "dead"
      ? api("GET", `/queues/${encodeURIComponent(name)}/dead?limit=50`)
      : api("GET", `/queues/${encodeURIComponent(name)}/items?state=${state}&limit=50`),
    loadActivity(name),
  ]);
  const act = (label, cls, confirmText, run) => el("button", { class: cls, onclick: async (event) => {
    if (confirmText && !window.confirm(confirmText)) return;
    event.target.disabled = true;
    try { await run(); say(""); } catch (error) { say(error.message); }
    render();
  } }, label);
  const base = `/queues/${encodeURIComponent(name)}`;
  const toolbar = el("div", { class: "toolbar" },
    q.paused ? act("Resume", "", null, () => api("POST", `${base}/resume`))
             : act("Pause", "secondary", `Pause ${name}? Pushes are still taken; nothing is handed out.`, () => api("POST", `${base}/pause`)),
    state === "dead" && items.items.length ? act("Redrive all dead", "secondary", `Make every dead item of ${name} ready again?`, () => api("POST", `${base}/redrive`, {})) : "",
    state === "dead" && items.items.length ? act("Purge dead", "danger", `Delete every dead item of ${name}? This cannot be undone.`, () => api("DELETE", `${base}/dead`)) : "");
  const cards = el("div", { class: "cards" }, ...STATES.map((s) => el("div", { class: "card" },
    el("div", { class: `value ${s === "dead" && q.dead ? "dead" : ""}` }, q[s]), el("div", { class: "label" }, s))),
    el("div", { class: "card" }, el("div", { class: "value" }, age(q.oldest_ready_age_seconds)), el("div", { class: "label" }, "oldest ready")));
  const tabs = el("nav", { class: "tabs" }, ...STATES.map((s) =>
    el("a", { href: `#/queues/${encodeURIComponent(name)}/${s}`, class: s === state ? "active" : "" }, `${s} (${q[s]})`)));
  const head = ["Item", "Attempts", "Created", state === "dead" ? "Died" : state === "leased" ? "Lease ends" : "Visible at", state === "dead" ? "Last error" : "Payload"];
  const rows = items.items.map((i) => el("tr", { "data-item": i.id },
    el("td", {}, el("code", {}, i.id)),
    el("td", { class: "num" }, `${i.attempts}/${i.max_attempts}`),
    el("td", {}, when(i.created_at)),
    el("td", {}, when(state === "dead" ? i.died_at : state === "leased" ? i.lease_expires_at : i.visible_at)),
    el("td", {}, state === "dead"
      ? [el("pre", { class: "error" }, i.errors.length ? i.errors[i.errors.length - 1].error : ""),
         act("Redrive", "secondary", `Make item ${i.id} ready again?`, () => api("POST", `${base}/redrive`, { ids: [i.id] }))]
      : el("code", {}, JSON.stringify(i.payload).slice(0, 120)))));
  show(
    el("p", {}, el("a", { href: "#/" }, "← Queues")),
    el("h1", {}, name, " ", el("span", { class: `badge ${q.paused ? "paused" : "live"}` }, q.paused ? "paused" : "live")),
    cards, chartSection(activity, "Activity"), toolbar, tabs,
    items.items.length === 0 ? el("p", { class: "muted" }, `No ${state} items.`) :
      el("table", { id: "items" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    items.next_cursor ? el("p", { class: "muted" }, "Showing the first 50.") : "");
}

let shown = null; // the route of the page on screen
let generation = 0; // each render's number: only the latest one may change the page

async function render() {
  clearTimeout(timer);
  const mine = ++generation;
  const latest = () => mine === generation;
  const show = (...nodes) => { if (latest()) main.replaceChildren(...nodes); };
  const route = location.hash;
  const parts = route.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const queue = parts[0] === "queues" && parts[1] ? parts[1] : null;
  try {
    if (queue !== null) await queuePage(show, queue, STATES.includes(parts[2]) ? parts[2] : "ready");
    else await queuesPage(show);
    if (!latest()) return;
    shown = route;
    say("");
  } catch (error) {
    if (!latest()) return; // another page was asked for meanwhile: it renders itself
    if (queue !== null && error.code === "QueueNotFound") {
      notFound(show, "Queue");
      shown = route;
      say("");
    } else {
      if (shown !== route) { main.replaceChildren(); shown = null; } // nothing of another page stays
      say(error.message.startsWith("Unauthorized") ? `${error.message} — enter an admin API key above.` : error.message);
    }
  }
  timer = setTimeout(render, 5000);
}

window.addEventListener("hashchange", render);
render();
