// The simplequeue dashboard: a page over the service's own API (no other server, no CDN). The API
// key, when the service has keys, stays in this tab's sessionStorage and goes as a Bearer token.
"use strict";

const STATES = ["ready", "delayed", "retrying", "leased", "dead"];
const PAGE = 50; // rows per page of a tab
const PAYLOAD_SHOWN = 4000; // characters of a payload shown before "Show all"
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
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
  administers.clear(); // what a key may do is learnt again for the new one
  showKey();
  render();
});
showKey();

// The search box takes an item's id, or else a dedup key or a group of the queue on screen (a
// queue's page or one of its items): the item holding the key is opened when the group has no
// live items; otherwise the results show both, the group's items paged.
let here = null; // the queue of the page on screen, if any

function enc(text) { return encodeURIComponent(text); }
function groupPath(name, group, cursor) {
  return `/queues/${enc(name)}/items/by-group?group=${enc(group)}&limit=${PAGE}${cursor ? `&cursor=${enc(cursor)}` : ""}`;
}
async function heldBy(name, key) { // the item holding the dedup key, or null
  try { return await api("GET", `/queues/${enc(name)}/items/by-dedup-key?dedup_key=${enc(key)}`); } catch (error) {
    if (error.code === "ItemNotFound") return null;
    throw error;
  }
}

document.getElementById("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("search");
  const text = input.value.trim();
  if (!text) return;
  if (UUID.test(text)) { input.value = ""; go(`#/items/${text.toLowerCase()}`); return; }
  const name = here;
  if (!name) { say({ code: "NoQueue", detail: `"${text}" is not an item id: open a queue to find a dedup key or a group in it` }); return; }
  try {
    const [held, group] = await Promise.all([heldBy(name, text), api("GET", groupPath(name, text, null))]);
    input.value = "";
    go(held && group.items.length === 0 ? `#/items/${held.id}` : `#/queues/${enc(name)}/find/${enc(text)}`);
  } catch (error) { say(error); }
});

function go(hash) { if (location.hash === hash) render(); else location.hash = hash; }

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
    Object.assign(error, { status: response.status, code, detail, fields: (data && data.fields) || [] });
    throw error;
  }
  return data;
}

// The banner: an API error with its code, or nothing.
function say(error) {
  if (!error) { banner.replaceChildren(); banner.hidden = true; return; }
  const hint = error.code === "Unauthorized" ? " — enter an admin API key above." : "";
  banner.replaceChildren(el("strong", { class: "code" }, error.code || "Error"), " ", error.detail ?? error.message, hint);
  banner.dataset.code = error.code || "";
  banner.hidden = false;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else if (name === "onchange") node.addEventListener("change", value);
    else if (name === "oninput") node.addEventListener("input", value);
    else if (name === "onsubmit") node.addEventListener("submit", value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

function span_(seconds) {
  const s = Math.abs(seconds);
  if (s < 1) return "";
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

// "3 s ago" or "in 5 min", the absolute time on hover.
function when(text) {
  if (!text) return el("span", { class: "muted" }, "—");
  const at = new Date(text);
  const seconds = (at.getTime() - Date.now()) / 1000;
  const amount = span_(seconds);
  const words = amount === "" ? "now" : seconds < 0 ? `${amount} ago` : `in ${amount}`;
  return el("time", { datetime: text, title: `${at.toLocaleString()} (${text})` }, words);
}

// An id: monospace, never wrapped, with a button that copies it.
function idOf(id, href) {
  const text = el("code", { class: "id" }, id);
  const copy = el("button", { type: "button", class: "copy", title: "Copy the id", "aria-label": `Copy id ${id}`, "data-key": `copy-${id}`, onclick: async (event) => {
    event.stopPropagation();
    const button = event.currentTarget;
    try { await navigator.clipboard.writeText(id); button.textContent = "Copied"; } catch {
      getSelection().selectAllChildren(text); button.textContent = "Selected"; // no clipboard: select it for Ctrl+C
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  } }, "Copy");
  return el("span", { class: "id-wrap" }, href ? el("a", { href, class: "id-link" }, text) : text, copy);
}

function badge(text, cls) { return el("span", { class: `badge ${cls || text}` }, text); }

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
  for (const child of children.flat(Infinity)) node.append(child instanceof Node ? child : String(child ?? ""));
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

function chartSection(activity, title, unkept = false) {
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
    el("p", { class: "muted small" }, `Per ${SPANS[span].per}; pushed by creation time, failures of items since completed are not counted.` +
      (unkept ? " Completions and deaths are counted from history, which this queue does not keep." : "")));
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

function notFound(show, what, why, back = ["#/", "Queues"]) {
  if (show.latest()) here = null;
  show(
    el("p", {}, el("a", { href: back[0] }, `← ${back[1]}`)),
    el("h1", { id: "not-found" }, `${what} not found`),
    el("p", { class: "muted" }, why));
}

// What the key may do is learnt from the API's answers: a 403 to an admin read of a queue means
// the key may not administer it (the API has no route that says a key's role).
const administers = new Map();

async function mayAdminister(queue) {
  if (administers.has(queue)) return administers.get(queue);
  try { await api("GET", `/queues/${encodeURIComponent(queue)}/items?state=ready&limit=1`); administers.set(queue, true); } catch (error) {
    if (error.status !== 403) throw error;
    administers.set(queue, false);
  }
  return administers.get(queue);
}

function readOnlyNote(text) { return el("p", { id: "read-only", class: "note" }, text); }

// A button that asks first (when confirmText), calls the API, shows its error in the banner, and
// renders the page again.
function act(label, cls, confirmText, run, attrs = {}) {
  return el("button", { type: "button", class: cls, ...attrs, onclick: async (event) => {
    if (confirmText && !window.confirm(typeof confirmText === "function" ? confirmText() : confirmText)) return;
    event.currentTarget.disabled = true;
    try { await run(); say(""); } catch (error) { say(error); }
    render();
  } }, label);
}

// --- the queues ----------------------------------------------------------------------------------

// The queues come a page at a time (GET /queues pages by name), paged as a queue's tabs are.
async function queuesPage(show) {
  const p = pagingFor("queues");
  const path = `/queues?limit=${PAGE}${p.cursor ? `&cursor=${enc(p.cursor)}` : ""}`;
  const [page, activity] = await Promise.all([api("GET", path), loadActivity(null)]);
  const { queues } = page;
  const paged = Boolean(page.next_cursor || p.before.length);
  if (show.latest()) here = null;
  const rows = queues.map((q) => el("tr", { class: "link", "data-queue": q.name, onclick: (event) => {
    if (event.target.closest("a, button")) return;
    location.hash = `#/queues/${encodeURIComponent(q.name)}`;
  } },
    el("td", {}, el("a", { href: `#/queues/${encodeURIComponent(q.name)}`, class: "queue-link" }, el("strong", {}, q.name)), " ", badge(q.paused ? "paused" : "live")),
    el("td", { class: "num" }, q.ready), el("td", { class: "num" }, q.leased), el("td", { class: "num" }, q.delayed),
    el("td", { class: "num" }, q.retrying), el("td", { class: `num ${q.dead ? "dead" : ""}` }, q.dead),
    el("td", { class: "num" }, age(q.oldest_ready_age_seconds)),
    el("td", { class: "num" }, q.history.completed)));
  show(
    el("h1", {}, "Queues"),
    el("p", { class: "muted", id: "queue-count" }, `${queues.length} queue${queues.length === 1 ? "" : "s"}${paged ? " on this page" : ""}; refreshed every 5 seconds.`),
    chartSection(activity, "All queues"),
    paged ? el("div", { class: "above-table" }, pager(page)) : "",
    queues.length === 0 && !paged ? el("p", {}, "No queue yet: push an item and it appears here.") :
      el("table", { id: "queues" },
        el("thead", {}, el("tr", {}, el("th", {}, "Queue"), ...["Ready", "Leased", "Delayed", "Retrying", "Dead", "Oldest ready", "Completed"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, rows)));
}

// --- topics: each with its subscriptions, and what reached their queues ---------------------------

function delivery(sub) { return (sub.attributes.RawMessageDelivery || "false") === "true" ? "raw" : "notification"; }

function filterOf(sub) {
  const policy = sub.attributes.FilterPolicy;
  if (!policy) return el("span", { class: "muted" }, "every message");
  const scope = sub.attributes.FilterPolicyScope === "MessageBody" ? "the message's body" : "its attributes";
  return el("div", {}, el("div", { class: "muted small" }, `on ${scope}:`), el("code", { class: "policy" }, policy));
}

async function topicsPage(show) {
  const p = pagingFor("topics");
  const path = `/topics?limit=${PAGE}${p.cursor ? `&cursor=${enc(p.cursor)}` : ""}`;
  const page = await api("GET", path);
  const { topics } = page;
  const paged = Boolean(page.next_cursor || p.before.length);
  if (show.latest()) here = null;
  const rows = topics.map((t) => el("tr", { class: "link", "data-topic": t.name, onclick: (event) => {
    if (event.target.closest("a, button")) return;
    location.hash = `#/topics/${enc(t.name)}`;
  } },
    el("td", {}, el("a", { href: `#/topics/${enc(t.name)}` }, el("strong", {}, t.name)), " ",
      badge(t.attributes.FifoTopic === "true" ? "fifo" : "standard", "live")),
    el("td", {}, t.attributes.DisplayName || ""),
    el("td", { class: "num" }, t.subscriptions)));
  show(
    el("h1", {}, "Topics"),
    el("p", { class: "muted", id: "topic-count" }, `${topics.length} topic${topics.length === 1 ? "" : "s"}${paged ? " on this page" : ""}: a message published to one reaches every subscribed queue and HTTP/S endpoint whose filter it passes.`),
    paged ? el("div", { class: "above-table" }, pager(page)) : "",
    topics.length === 0 && !paged ? el("p", {}, "No topic yet: PUT /topics/{name}, or `simplequeue topic create`.") :
      el("table", { id: "topics" },
        el("thead", {}, el("tr", {}, el("th", {}, "Topic"), el("th", {}, "Display name"), el("th", { class: "num" }, "Subscriptions"))),
        el("tbody", {}, rows)));
}

// A topic's page: its queue subscriptions, each with its queue's counts: what was delivered and
// is waiting, being handled, done (completed), or failed for good (dead); its HTTP/S endpoints,
// confirmed or not, with what the deliverer holds for every topic's endpoints (DELIVERIES).
const DELIVERIES = "simplequeue.deliveries";

async function topicPage(show, name) {
  const [topic, listed] = await Promise.all([
    api("GET", `/topics/${enc(name)}`),
    api("GET", `/topics/${enc(name)}/subscriptions?limit=1000`),
  ]);
  const byEndpoint = (a, b) => (a.endpoint < b.endpoint ? -1 : a.endpoint > b.endpoint ? 1 : 0);
  const subs = listed.subscriptions.filter((s) => s.protocol === "sqs").sort(byEndpoint);
  const hooks = listed.subscriptions.filter((s) => s.protocol !== "sqs").sort(byEndpoint);
  const orNull = (error) => { if (error.code === "QueueNotFound") return null; throw error; };
  const [queues, deliveries] = await Promise.all([
    Promise.all(subs.map((s) => api("GET", `/queues/${enc(s.endpoint)}`).catch(orNull))),
    hooks.length ? api("GET", `/queues/${DELIVERIES}`).catch(orNull) : null,
  ]);
  const total = (key) => queues.reduce((sum, q) => sum + (q ? dig(q, key) : 0), 0);
  const rows = subs.map((s, n) => {
    const q = queues[n];
    const counts = q ? [q.ready + q.delayed + q.retrying, q.leased, q.history.completed, q.dead] : ["", "", "", ""];
    return el("tr", { "data-subscription": s.id },
      el("td", {}, q ? el("a", { href: `#/queues/${enc(s.endpoint)}` }, el("strong", {}, s.endpoint))
                     : el("span", {}, el("strong", {}, s.endpoint), " ", badge("no queue", "paused"))),
      el("td", {}, delivery(s)),
      el("td", {}, filterOf(s)),
      ...counts.map((c, i) => el("td", { class: `num ${i === 3 && c ? "dead" : ""}` }, c)));
  });
  const hookRows = hooks.map((s) => el("tr", { "data-subscription": s.id },
    el("td", {}, el("code", {}, s.endpoint)),
    el("td", {}, s.confirmed ? badge("confirmed", "live") : badge("pending confirmation", "paused")),
    el("td", {}, delivery(s)),
    el("td", {}, filterOf(s)),
    el("td", {}, s.attributes.RedrivePolicy ? el("code", {}, JSON.parse(s.attributes.RedrivePolicy).deadLetterTargetArn.split(":").pop()) : el("span", { class: "muted" }, "none: dies in deliveries"))));
  const d = deliveries;
  const sending = d ? [["Waiting to send", d.ready + d.delayed], ["Retrying", d.retrying], ["Sending now", d.leased], ["Sent", d.history.completed], ["Failed (dead)", d.dead]] : [];
  if (show.latest()) here = null;
  show(
    el("p", {}, el("a", { href: "#/topics" }, "← Topics")),
    el("h1", {}, name, " ", badge(topic.attributes.FifoTopic === "true" ? "fifo" : "standard", "live")),
    el("p", { class: "muted" }, el("code", {}, topic.arn), topic.attributes.DisplayName ? ` · ${topic.attributes.DisplayName}` : ""),
    el("div", { class: "cards" },
      ...[["Subscriptions", subs.length + hooks.length], ["Waiting", total("ready") + total("delayed") + total("retrying")], ["Completed", total("history.completed")], ["Failed (dead)", total("dead")]]
        .map(([label, value]) => el("div", { class: "card" }, el("div", { class: `value ${label.startsWith("Failed") && value ? "dead" : ""}` }, value), el("div", { class: "label" }, label)))),
    subs.length === 0 && hooks.length === 0 ? el("p", {}, "No subscription yet: nothing published reaches a queue or an endpoint.") : "",
    subs.length === 0 ? "" :
      el("table", { id: "subscriptions" },
        el("thead", {}, el("tr", {}, el("th", {}, "Queue"), el("th", {}, "Delivery"), el("th", {}, "Filter"),
          ...["Waiting", "Leased", "Completed", "Dead"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, rows)),
    hooks.length === 0 ? "" : el("section", { id: "endpoints" },
      el("h2", {}, "HTTP/S endpoints"),
      el("table", { id: "endpoint-subscriptions" },
        el("thead", {}, el("tr", {}, el("th", {}, "Endpoint"), el("th", {}, "Status"), el("th", {}, "Delivery"), el("th", {}, "Filter"), el("th", {}, "Dead letters to"))),
        el("tbody", {}, hookRows)),
      el("p", { class: "muted" }, "Every topic's HTTP/S messages wait in ",
        el("a", { href: `#/queues/${DELIVERIES}` }, DELIVERIES), " until sent; a failed one waits there for its next retry, and one out of retries goes to the subscription's dead-letter queue or dies there with its reason."),
      d ? el("div", { class: "cards", id: "deliveries" },
        ...sending.map(([label, value]) => el("div", { class: "card" }, el("div", { class: `value ${label.startsWith("Failed") && value ? "dead" : ""}` }, value), el("div", { class: "label" }, label)))) : ""));
}

// --- schedules: what each pushes, to which queue, when ---------------------------------------------

// Every schedule route takes an admin key covering the schedule's queue: a key that may not
// administer sees a note where the schedules would be.
function schedulesRefused(name) {
  return readOnlyNote(`Schedules push into queues on their own, so they need an admin API key that covers their queue: this key may not see ${name ? "this one" : "them"}.`);
}

function plural(n, unit) { return `${n} ${unit}${n === 1 ? "" : "s"}`; }

// every_seconds in the largest whole unit: "every 90 s", "every 5 minutes", "every day".
function every(seconds) {
  for (const [size, unit] of [[86400, "day"], [3600, "hour"], [60, "minute"]]) {
    if (seconds % size === 0) return seconds === size ? `every ${unit}` : `every ${plural(seconds / size, unit)}`;
  }
  return seconds === 1 ? "every second" : `every ${seconds} s`;
}

// A date and time in the browser's zone, the year only when it is not this one.
function absolute(text) {
  const at = new Date(text);
  const year = at.getFullYear() === new Date().getFullYear() ? undefined : "numeric";
  return at.toLocaleString([], { year, month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// When it fires, in words: every N, a cron expression in its zone, or once at a time.
function timing(s) {
  if (s.every_seconds != null) return el("span", { class: "timing" }, every(s.every_seconds));
  if (s.cron != null) return el("span", { class: "timing" }, "cron ", el("code", { class: "cron" }, s.cron), " ", el("span", { class: "muted" }, s.timezone));
  return el("span", { class: "timing" }, "once at ", el("time", { datetime: s.at, title: s.at }, absolute(s.at)));
}

// A time both ways: "in 40 s" and, below it, the date and time.
function whenBoth(text, none = "—") {
  if (!text) return el("span", { class: "muted" }, none);
  return el("span", { class: "when" }, when(text), el("span", { class: "muted small absolute" }, absolute(text)));
}

function nextRun(s, long = false) {
  if (s.paused) return el("span", { class: "muted" }, long ? "none while paused (resumed, it fires from the next slot after then; the slots of the pause are not caught up)" : "paused");
  return whenBoth(s.next_run_at, s.at ? "fired (once)" : "—");
}

// The item the last firing pushed: whole, with its copy button, or (in the list) its first
// characters, the whole id on hover.
function lastItem(s, short = false) {
  const id = s.last_item_id;
  if (!id) return el("span", { class: "muted" }, "—");
  if (!short) return idOf(id, `#/items/${id}`);
  return el("a", { href: `#/items/${id}`, class: "id-link", title: id }, el("code", { class: "id" }, `${id.slice(0, 8)}…`));
}

function queueLink(queue) { return el("a", { href: `#/queues/${enc(queue)}` }, queue); }

function scheduleExample() {
  const auth = key() ? " -H 'Authorization: Bearer <admin key>'" : "";
  const sdk = key() ? `, api_key="<admin key>"` : "";
  return [
    el("p", {}, "No schedule yet. Make one with the API, for instance a push to the queue ", el("code", {}, "ticks"), " every minute:"),
    el("pre", { class: "payload", id: "schedule-example" },
      `curl -X PUT '${location.origin}/schedules/tick'${auth} -H 'Content-Type: application/json' \\\n` +
      `  -d '{"queue": "ticks", "payload": {"job": "tick"}, "every_seconds": 60}'`),
    el("p", {}, "or from Python:"),
    el("pre", { class: "payload" },
      "from simplequeue.client import Client\n\n" +
      `with Client("${location.origin}"${sdk}) as sq:\n` +
      `    sq.put_schedule("tick", queue="ticks", payload={"job": "tick"}, every_seconds=60)`),
    el("p", { class: "muted" }, "cron expressions in a time zone and one-time pushes are made the same way: see the documentation's Schedules page, or ",
      el("code", {}, "simplequeue schedule put --help"), "."),
  ];
}

async function schedulesPage(show) {
  const p = pagingFor("schedules");
  const path = `/schedules?limit=${PAGE}${p.cursor ? `&cursor=${enc(p.cursor)}` : ""}`;
  let page;
  try { page = await api("GET", path); } catch (error) {
    if (error.status !== 403) throw error;
    if (show.latest()) here = null;
    return show(el("h1", {}, "Schedules"), schedulesRefused());
  }
  const { schedules } = page;
  const paged = Boolean(page.next_cursor || p.before.length);
  if (show.latest()) here = null;
  const rows = schedules.map((s) => el("tr", { class: "link", "data-schedule": s.name, onclick: (event) => {
    if (event.target.closest("a, button")) return;
    location.hash = `#/schedules/${enc(s.name)}`;
  } },
    el("td", { class: "name-cell" }, el("a", { href: `#/schedules/${enc(s.name)}`, class: "queue-link" }, el("strong", {}, s.name)), s.paused ? [" ", badge("paused")] : ""),
    el("td", {}, queueLink(s.queue)),
    el("td", {}, timing(s)),
    el("td", { "data-col": "next" }, nextRun(s)),
    el("td", { "data-col": "last" }, whenBoth(s.last_run_at, "never")),
    el("td", { class: "id-cell", "data-col": "item" }, lastItem(s, true))));
  show(
    el("h1", {}, "Schedules"),
    schedules.length === 0 && !paged ? "" : el("p", { class: "muted", id: "schedule-count" }, `${schedules.length} schedule${schedules.length === 1 ? "" : "s"}${paged ? " on this page" : ""}: each pushes its payload to its queue at its times, once per time, whichever replica fires it; refreshed every 5 seconds.`),
    paged ? el("div", { class: "above-table" }, pager(page)) : "",
    schedules.length === 0 && !paged ? el("section", { class: "panel", id: "no-schedules" }, scheduleExample()) :
      el("div", { class: "table-wrap" }, el("table", { id: "schedules" },
        el("thead", {}, el("tr", {}, ...["Schedule", "Queue", "When", "Next run", "Last run", "Last item"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows))));
}

const OVERLAP = { allow: "allow: a slot fires whatever its previous item is doing", skip: "skip: a slot whose previous item is still live pushes nothing" };
const CATCH_UP = { none: "none: after an outage, the last slot only if it is under a minute late", latest: "latest: after an outage, the last slot missed, once", all: "all: after an outage, each slot missed (at most 100)" };

function scheduleFacts(s) {
  const muted = (text) => el("span", { class: "muted" }, text);
  const rows = [
    ["Queue", queueLink(s.queue)],
    ["When", timing(s)],
    ["Next run", nextRun(s, true)],
    ["Last run", whenBoth(s.last_run_at, "never")],
    ["Last item", lastItem(s)],
    ["Priority", s.priority],
    ["Group", s.group ?? muted("—")],
    ["Jitter", s.jitter_seconds ? `up to ${s.jitter_seconds} s after each slot` : muted("none")],
    ["Overlap", OVERLAP[s.overlap] ?? s.overlap],
    ["Catch-up", CATCH_UP[s.catch_up] ?? s.catch_up],
    ["Created", whenBoth(s.created_at)],
    ["Changed", whenBoth(s.modified_at, "never")],
  ];
  return el("dl", { class: "facts", id: "schedule-facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
}

function scheduleActions(s) {
  const path = `/schedules/${enc(s.name)}`;
  return el("div", { class: "toolbar" },
    s.paused ? act("Resume", "", null, () => api("POST", `${path}/resume`), { id: "schedule-resume" })
             : act("Pause", "secondary", null, () => api("POST", `${path}/pause`), { id: "schedule-pause" }),
    act("Run now", "secondary", `Push one item of ${s.name} to ${s.queue} now? Its slots stay as they are${s.paused ? " (it stays paused)" : ""}.`,
      () => api("POST", `${path}/trigger`), { id: "schedule-trigger" }));
}

function deleteScheduleSection(s) {
  return el("section", { class: "panel danger-zone" }, el("h2", {}, "Delete schedule"),
    el("p", { class: "muted" }, `Once deleted, ${s.name} fires no more; the items it pushed stay in ${s.queue}.`),
    el("button", { type: "button", class: "danger", id: "delete-schedule", onclick: () => deleteScheduleDialog(s) }, "Delete schedule…"));
}

// The typed-name confirmation, as a queue's: outside <main> so that no refresh takes it away.
function deleteScheduleDialog(s) {
  const input = el("input", { id: "confirm-name", autocomplete: "off", spellcheck: "false", "aria-describedby": "delete-what" });
  const problem = el("p", { id: "delete-problem", class: "error-text", role: "alert", hidden: true });
  const remove = async () => {
    try {
      await api("DELETE", `/schedules/${enc(s.name)}`);
      dialog.close();
      go("#/schedules");
    } catch (error) {
      problem.replaceChildren(el("strong", {}, error.code), " ", error.detail);
      problem.hidden = false;
    }
  };
  const confirmButton = el("button", { type: "submit", class: "danger", id: "confirm-delete", disabled: true }, "Delete");
  input.addEventListener("input", () => { confirmButton.disabled = input.value !== s.name; });
  const dialog = el("dialog", { id: "delete-dialog", "aria-labelledby": "delete-title" },
    el("form", { onsubmit: (event) => { event.preventDefault(); if (input.value === s.name) remove(); } },
      el("h2", { id: "delete-title" }, `Delete schedule ${s.name}?`),
      el("p", { id: "delete-what" }, `It fires no more; the items it pushed stay in ${s.queue}. This cannot be undone. Type the schedule's name to confirm.`),
      el("label", { for: "confirm-name" }, "Schedule name"), input, problem,
      el("div", { class: "toolbar" }, confirmButton, el("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  input.focus();
}

function schedulePayload(s) {
  const text = JSON.stringify(s.payload, null, 2);
  return el("section", { class: "panel" }, el("h2", {}, "Payload ", el("span", { class: "muted small" }, "each firing pushes it as the item's payload")),
    el("pre", { id: "schedule-payload", class: "payload", tabindex: "0" }, text.length > PAYLOAD_SHOWN ? `${text.slice(0, PAYLOAD_SHOWN)}\n…` : text));
}

async function schedulePage(show, name) {
  let s;
  try { s = await api("GET", `/schedules/${enc(name)}`); } catch (error) {
    if (error.status !== 403) throw error;
    if (show.latest()) here = null;
    return show(el("p", {}, el("a", { href: "#/schedules" }, "← Schedules")), el("h1", {}, name), schedulesRefused(name));
  }
  // Reading a schedule takes an admin key covering its queue: whoever sees it may act on it.
  administers.set(s.queue, true);
  if (show.latest()) here = null;
  show(el("p", {}, el("a", { href: "#/schedules" }, "← Schedules")),
    el("h1", {}, s.name, " ", badge(s.paused ? "paused" : "live")),
    el("p", { class: "muted", id: "schedule-summary" }, "Pushes to ", queueLink(s.queue), ", ", timing(s), "."),
    scheduleActions(s), scheduleFacts(s), schedulePayload(s), deleteScheduleSection(s));
}

// --- a queue: its counts, chart, tabs of items, settings -------------------------------------------

// Paging of the tab on screen: the cursor of the page shown and a stack of those before it.
const paging = { tab: null, cursor: null, before: [] };
// The rows ticked for a bulk action, kept across refreshes of the same tab.
const selected = new Set();

function pagingFor(tab) {
  if (paging.tab !== tab) { Object.assign(paging, { tab, cursor: null, before: [] }); selected.clear(); }
  return paging;
}

function tabPath(name, tab, cursor) {
  const base = `/queues/${encodeURIComponent(name)}`;
  const page = `limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
  if (tab === "dead") return `${base}/dead?${page}`;
  if (tab === "history") return `${base}/history?${page}`;
  return `${base}/items?state=${tab}&${page}`;
}

function lastError(item) {
  const errors = item.errors || [];
  return errors.length ? errors[errors.length - 1].error : "";
}

function preview(payload) {
  const text = JSON.stringify(payload);
  return el("code", { class: "payload-preview", title: text.length > 120 ? "Open the item for the whole payload" : false }, text.length > 120 ? `${text.slice(0, 120)}…` : text);
}

// Each tab's columns after the id: [heading, cell of a row].
const COLUMNS = {
  ready: [["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["Ready since", (i) => when(i.visible_at)], ["Priority", (i) => i.priority], ["Payload", (i) => preview(i.payload)]],
  delayed: [["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["Visible at", (i) => when(i.visible_at)], ["Priority", (i) => i.priority], ["Payload", (i) => preview(i.payload)]],
  retrying: [["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["Retry at", (i) => when(i.visible_at)], ["Last error", (i) => el("pre", { class: "error" }, lastError(i))]],
  leased: [["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["First popped", (i) => when(i.first_popped_at)], ["Lease ends", (i) => when(i.lease_expires_at)], ["Payload", (i) => preview(i.payload)]],
  dead: [["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["Died", (i) => when(i.died_at)], ["Last error", (i) => el("pre", { class: "error" }, lastError(i))]],
  group: [["State", (i) => badge(i.status)], ["Attempts", (i) => `${i.attempts}/${i.max_attempts}`], ["Created", (i) => when(i.created_at)],
    ["Visible at", (i) => when(i.visible_at)], ["Payload", (i) => preview(i.payload)]],
  history: [["Outcome", (h) => badge(h.outcome)], ["Attempts", (h) => h.attempts], ["Created", (h) => when(h.created_at)],
    ["Finished", (h) => when(h.finished_at)], ["Last error", (h) => el("pre", { class: "error" }, h.last_error || "")]],
};

function itemsTable(name, tab, page, admin) {
  const bulk = admin && tab !== "history" && tab !== "group";
  const base = `/queues/${encodeURIComponent(name)}`;
  const ids = page.items.map((i) => i.id);
  for (const id of [...selected]) if (!ids.includes(id)) selected.delete(id);
  const count = el("span", { id: "selected-count", class: "muted" });
  const bulkButtons = [];
  const refresh = () => {
    count.textContent = selected.size ? `${selected.size} selected` : "None selected";
    for (const b of bulkButtons) b.disabled = selected.size === 0;
    all.checked = selected.size > 0 && selected.size === ids.length;
    all.indeterminate = selected.size > 0 && selected.size < ids.length;
  };
  const all = el("input", { type: "checkbox", id: "select-all", "aria-label": "Select every item on this page", onchange: (event) => {
    for (const box of main.querySelectorAll("input.select")) { box.checked = event.target.checked; }
    if (event.target.checked) ids.forEach((id) => selected.add(id)); else selected.clear();
    refresh();
  } });
  const rows = page.items.map((i) => el("tr", { "data-item": i.id },
    bulk ? el("td", { class: "tick" }, el("input", { type: "checkbox", class: "select", "aria-label": `Select item ${i.id}`, "data-key": `sel-${i.id}`, checked: selected.has(i.id), onchange: (event) => {
      if (event.target.checked) selected.add(i.id); else selected.delete(i.id);
      refresh();
    } })) : "",
    el("td", { class: "id-cell" }, idOf(i.id, `#/items/${i.id}`)),
    ...COLUMNS[tab].map(([heading, cell]) => el("td", { class: heading === "Payload" ? "fill" : false }, cell(i))),
    tab === "dead" && admin ? el("td", {}, act("Redrive", "secondary", `Make item ${i.id} ready again?`, () => api("POST", `${base}/redrive`, { ids: [i.id] }), { "data-key": `redrive-${i.id}` })) : ""));
  if (bulk) {
    const chosen = () => [...selected];
    if (tab === "dead") {
      bulkButtons.push(act("Redrive selected", "secondary", () => `Make the ${selected.size} selected dead item${selected.size === 1 ? "" : "s"} of ${name} ready again?`,
        async () => { await api("POST", `${base}/redrive`, { ids: chosen() }); selected.clear(); }, { id: "redrive-selected" }));
    } else {
      bulkButtons.push(act("Delete selected", "danger", () => `Delete the ${selected.size} selected item${selected.size === 1 ? "" : "s"} of ${name}? Each is finished now (its history records it as completed), whoever holds it.`,
        async () => {
          const { results } = await api("POST", "/items/complete", { items: chosen().map((id) => ({ id })) });
          selected.clear();
          const missed = results.filter((r) => r.result !== "completed");
          if (missed.length) throw Object.assign(new Error(), { code: "NotAllDeleted", detail: `${missed.length} of ${results.length} were not deleted: ${missed.map((r) => `${r.id} ${r.result}`).join(", ")}` });
        }, { id: "delete-selected" }));
    }
  }
  const head = el("tr", {}, bulk ? el("th", { class: "tick" }, all) : "", el("th", {}, "Item"), ...COLUMNS[tab].map(([h]) => el("th", {}, h)), tab === "dead" && admin ? el("th", {}, "") : "");
  const table = el("div", { class: "table-wrap" }, el("table", { id: "items", "data-tab": tab }, el("thead", {}, head), el("tbody", {}, rows)));
  const bar = bulk ? el("div", { class: "bulk", id: "bulk" }, count, ...bulkButtons) : "";
  if (bulk) refresh();
  return [bar, table];
}

function pager(page) {
  const p = paging;
  const number = p.before.length + 1;
  return el("nav", { class: "pager", "aria-label": "Pages" },
    el("button", { type: "button", class: "secondary", id: "page-previous", disabled: p.before.length === 0, onclick: () => {
      p.cursor = p.before.pop() ?? null; selected.clear(); render();
    } }, "← Previous"),
    el("span", { id: "page-number", class: "muted" }, `Page ${number}`),
    el("button", { type: "button", class: "secondary", id: "page-next", disabled: !page.next_cursor, onclick: () => {
      p.before.push(p.cursor); p.cursor = page.next_cursor; selected.clear(); render();
    } }, "Next →"));
}

function queueHead(q) {
  return [el("p", {}, el("a", { href: "#/" }, "← Queues")),
    el("h1", {}, q.name, " ", badge(q.paused ? "paused" : "live")), limitsLine(q), bindingLine(q)];
}

// The queue's flow limits, if it has any, and whether its leases are at max_leased now.
function limitsLine(q) {
  const s = q.settings;
  const parts = [];
  if (s.max_leased != null) parts.push(`at most ${s.max_leased} leased at once (${q.leased} now)`);
  if (s.max_leased_per_key != null) parts.push(`at most ${s.max_leased_per_key} of one key leased at once`);
  if (s.rate_per_second != null) parts.push(`${s.rate_per_second} items/s, bursts of ${s.rate_burst ?? Math.max(1, Math.ceil(s.rate_per_second))}`);
  if (!parts.length) return "";
  const full = s.max_leased != null && q.leased >= s.max_leased;
  return el("p", { id: "limits", class: "muted" }, "Flow limits: ", parts.join("; "), full ? [" ", el("span", { class: "badge at-limit" }, "at its limit")] : "");
}

// Which limits cut the queue's pops short, the latest first, as the replica that answered saw them
// (its own pops since it started: another replica may have seen others).
function bindingLine(q) {
  const seen = q.limits_binding || [];
  if (!seen.length) return "";
  const ago = (at) => age(Math.max(0, (Date.now() - Date.parse(at)) / 1000));
  return el("p", { id: "binding", class: "muted" }, "Pops cut short by: ",
    ...seen.flatMap((b, n) => [n ? "; " : "", el("span", { class: "badge at-limit", "data-limit": b.limit }, b.limit),
      ` ${b.pops} pop${b.pops === 1 ? "" : "s"}, last ${ago(b.last_seen)} ago`]),
    el("span", { class: "small" }, " (this replica)"));
}

// The queue's busiest fairness keys: the most ready first, each with its leases and its cap.
function keysPanel(q) {
  const keys = q.top_keys || [];
  if (!keys.length) return "";
  const rows = keys.map((k) => el("tr", { "data-key": k.key ?? "" },
    el("td", { class: "key-cell" }, k.key === null ? el("span", { class: "muted" }, "(no key)") : k.key),
    el("td", { class: "num" }, k.ready), el("td", { class: k.at_limit ? "num full" : "num" }, k.leased),
    el("td", { class: "num" }, k.max_leased ?? "—"),
    el("td", { class: "mark" }, k.at_limit ? badge("at its limit", "at-limit") : "")));
  const head = el("tr", {}, el("th", {}, "Key"), el("th", { class: "num" }, "Ready"), el("th", { class: "num" }, "Leased"),
    el("th", { class: "num" }, "Limit"), el("th", { class: "mark" }, ""));
  return el("section", { class: "panel", id: "top-keys" },
    el("h2", {}, "Busiest keys ", el("span", { class: "muted small" }, `the ${keys.length === 1 ? "one" : keys.length} with the most ready items`)),
    el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {}, rows))));
}

function cards(q) {
  return el("div", { class: "cards" }, ...STATES.map((s) => el("div", { class: "card" },
    el("div", { class: `value ${s === "dead" && q.dead ? "dead" : ""}` }, q[s]), el("div", { class: "label" }, s))),
    el("div", { class: "card" }, el("div", { class: "value" }, age(q.oldest_ready_age_seconds)), el("div", { class: "label" }, "oldest ready")));
}

function tabsNav(q, tab) {
  const name = encodeURIComponent(q.name);
  const count = { ...Object.fromEntries(STATES.map((s) => [s, q[s]])), history: q.history.completed + q.history.dead };
  return el("nav", { class: "tabs", "aria-label": "Item states" },
    ...[...STATES, "history"].map((s) => el("a", { href: `#/queues/${name}/${s}`, class: s === tab ? "active" : "", "aria-current": s === tab ? "page" : false, "data-tab": s }, `${s} (${count[s]})`)),
    el("a", { href: `#/queues/${name}/settings`, class: tab === "settings" ? "active settings" : "settings", "aria-current": tab === "settings" ? "page" : false, "data-tab": "settings" }, "settings"));
}

function toolbar(q, tab, page) {
  const name = q.name;
  const base = `/queues/${encodeURIComponent(name)}`;
  const dead = tab === "dead" && page && page.items.length;
  return el("div", { class: "toolbar" },
    q.paused ? act("Resume", "", null, () => api("POST", `${base}/resume`), { id: "resume" })
             : act("Pause", "secondary", `Pause ${name}? Pushes are still taken; nothing is handed out.`, () => api("POST", `${base}/pause`), { id: "pause" }),
    dead ? act("Redrive all dead", "secondary", `Make every dead item of ${name} (${q.dead}) ready again?`, () => api("POST", `${base}/redrive`, {}), { id: "redrive-all" }) : "",
    dead ? act("Purge dead", "danger", `Delete every dead item of ${name} (${q.dead})? This cannot be undone.`, () => api("DELETE", `${base}/dead`), { id: "purge-dead" }) : "");
}

async function queuePage(show, name, tab) {
  if (tab === "settings") return settingsPage(show, name);
  const p = pagingFor(`${name}/${tab}`);
  const refused = (error) => { if (error.status === 403) return { refused: error }; throw error; };
  const [q, page, activity] = await Promise.all([
    api("GET", `/queues/${encodeURIComponent(name)}`),
    api("GET", tabPath(name, tab, p.cursor)).catch(refused),
    loadActivity(name),
  ]);
  if (page.refused) {
    administers.set(name, false);
    if (show.latest()) here = name;
    return show(...queueHead(q), cards(q), keysPanel(q), chartSection(activity, "Activity"),
      readOnlyNote(`This key may read the counts of ${name} only: its items, history, settings and actions need an admin key that covers it.`));
  }
  administers.set(name, true);
  if (!show.latest()) return; // a render overtaken by another must not touch the selection
  here = name;
  const [bulkBar, table] = itemsTable(name, tab, page, true);
  const empty = tab === "history" ? "No finished items within the queue's retention." : `No ${tab} items.`;
  // A queue whose retention is 0 writes no history at all: say so where its history would be.
  const unkept = tab === "history" && q.settings.retention_seconds === 0
    ? el("p", { class: "muted", id: "no-history" }, "This queue keeps no history: its retention_seconds is 0, so its items finish without a record. Set a retention in its settings to keep some.")
    : "";
  show(...queueHead(q), cards(q), keysPanel(q), chartSection(activity, "Activity", q.settings.retention_seconds === 0), toolbar(q, tab, page), tabsNav(q, tab), unkept,
    el("div", { class: "above-table" }, page.items.length ? bulkBar : "", page.next_cursor || p.before.length ? pager(page) : ""),
    page.items.length === 0 && p.before.length === 0 ? (unkept ? "" : el("p", { class: "muted", id: "empty" }, empty)) : table);
}

// --- a search's results: the item holding a dedup key, and a group's live items ---------------------

async function findPage(show, name, text) {
  const p = pagingFor(`${name}/find/${text}`);
  const [q, held, page] = await Promise.all([
    api("GET", `/queues/${enc(name)}`), heldBy(name, text), api("GET", groupPath(name, text, p.cursor)),
  ]);
  if (!show.latest()) return;
  here = name;
  const dedup = el("section", { class: "panel", id: "found-dedup" }, el("h2", {}, "Dedup key"),
    held ? el("p", {}, "Held by item ", idOf(held.id, `#/items/${held.id}`), " ", badge(held.status))
      : el("p", { class: "muted", id: "no-dedup" }, `No live or dead item of ${name} holds this dedup key.`));
  const [, table] = itemsTable(name, "group", page, false);
  const group = el("section", { class: "panel", id: "found-group" },
    el("h2", {}, "Group ", el("span", { class: "muted small" }, "live items in group order, the next one handed out first")),
    page.next_cursor || p.before.length ? el("div", { class: "above-table" }, pager(page)) : "",
    page.items.length === 0 && p.before.length === 0 ? el("p", { class: "muted", id: "no-group" }, `No live item of ${name} is in this group.`) : table);
  show(...queueHead(q), el("h2", { id: "found-title" }, "Found for ", el("code", { class: "searched" }, text)), dedup, group);
}

// --- a queue's settings, and deleting it ---------------------------------------------------------

const SETTINGS = [
  ["max_attempts", "Max attempts", "Pops before a failure or expiry makes an item dead."],
  ["lease_seconds", "Lease (s)", "Lease of a pop that gives none. 0: a popped item is visible again at once."],
  ["backoff.base_seconds", "Backoff base (s)", "Delay after the first failed attempt."],
  ["backoff.factor", "Backoff factor", "Each further attempt's delay is this many times the one before."],
  ["backoff.cap_seconds", "Backoff cap (s)", "No delay is longer."],
  ["backoff.jitter", "Backoff jitter", "Up to this fraction of a delay is taken off at random (0–1)."],
  ["retention_seconds", "History retention (s)", "Finished items' records are kept this long."],
  ["dedup_window_seconds", "Dedup window (s)", "A dedup_key keeps matching this long after its item finished (or after its push: see below)."],
];
const WINDOW_FROM = [["finish", "when its item finishes"], ["send", "at the push (SQS FIFO)"]];
// Settings that may be none: an empty field sends null.
const OPTIONAL_SETTINGS = [
  ["dead_letter_queue", "Dead-letter queue", "Items that die here move to this queue (it must exist). Empty: they stay dead here.", "text"],
  ["message_retention_seconds", "Message retention (s)", "Live items older than this are never handed out, then deleted (60 to 1209600). Empty: kept until they finish.", "decimal"],
  ["max_leased", "Max leased", "At most this many items are leased at once, across every replica. Empty: no limit.", "decimal"],
  ["rate_per_second", "Rate (items/s)", "Pops hand out at most this many items a second, on average, across every replica. Empty: no limit.", "decimal"],
  ["rate_burst", "Rate burst", "How many may go at once after a quiet spell (needs a rate). Empty: one second's worth.", "decimal"],
  ["priority_aging_seconds", "Priority aging (s)", "A waiting item's effective priority rises by one per this many seconds; a change re-ranks the items here. Empty: priorities never age.", "decimal"],
];

function dig(object, path) { return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), object); }

function settingsBody(form) {
  const body = { backoff: {} };
  for (const [path] of SETTINGS) {
    const text = form.elements[path].value.trim();
    const value = text !== "" && Number.isFinite(Number(text)) ? Number(text) : text; // anything else: the API says why
    if (path.startsWith("backoff.")) body.backoff[path.slice(8)] = value; else body[path] = value;
  }
  for (const [path, , , mode] of OPTIONAL_SETTINGS) {
    const text = form.elements[path].value.trim();
    body[path] = text === "" ? null : mode === "decimal" && Number.isFinite(Number(text)) ? Number(text) : text;
  }
  body.dedup_window_from = form.elements.dedup_window_from.value;
  body.history_payload = form.elements.history_payload.checked;
  return body;
}

function settingsForm(q, admin) {
  const message = el("p", { id: "settings-message", role: "status", hidden: true });
  const fields = SETTINGS.map(([path, label, help]) => el("div", { class: "field" },
    el("label", { for: `set-${path}` }, label),
    el("input", { id: `set-${path}`, name: path, value: String(dig(q.settings, path)), inputmode: "decimal", disabled: !admin, "aria-describedby": `help-${path}` }),
    el("small", { id: `help-${path}`, class: "muted" }, help),
    el("small", { class: "field-error", "data-field": path, hidden: true })));
  const optional = OPTIONAL_SETTINGS.map(([path, label, help, mode]) => el("div", { class: "field" },
    el("label", { for: `set-${path}` }, label),
    el("input", { id: `set-${path}`, name: path, value: q.settings[path] == null ? "" : String(q.settings[path]), inputmode: mode, disabled: !admin, "aria-describedby": `help-${path}` }),
    el("small", { id: `help-${path}`, class: "muted" }, help),
    el("small", { class: "field-error", "data-field": path, hidden: true })));
  const windowFrom = el("div", { class: "field" },
    el("label", { for: "set-dedup_window_from" }, "Dedup window starts"),
    el("select", { id: "set-dedup_window_from", name: "dedup_window_from", disabled: !admin, "aria-describedby": "help-dedup_window_from" },
      ...WINDOW_FROM.map(([value, label]) => el("option", { value, selected: q.settings.dedup_window_from === value }, label))),
    el("small", { id: "help-dedup_window_from", class: "muted" }, "At the push, a key matches for the window whether or not its item is still there."),
    el("small", { class: "field-error", "data-field": "dedup_window_from", hidden: true }));
  const history = el("div", { class: "field check" },
    el("input", { id: "set-history_payload", name: "history_payload", type: "checkbox", checked: q.settings.history_payload, disabled: !admin }),
    el("label", { for: "set-history_payload" }, "Keep payloads in history"));
  const form = el("form", { id: "settings", novalidate: true, onsubmit: async (event) => {
    event.preventDefault();
    for (const e of form.querySelectorAll(".field-error")) { e.hidden = true; e.textContent = ""; }
    for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
    try {
      const saved = await api("PUT", `/queues/${encodeURIComponent(q.name)}`, settingsBody(form));
      say("");
      message.className = "saved";
      message.textContent = `Saved: they apply from the next pop, fail or finish on.`;
      for (const [path] of SETTINGS) form.elements[path].value = String(dig(saved.settings, path));
      for (const [path] of OPTIONAL_SETTINGS) form.elements[path].value = saved.settings[path] == null ? "" : String(saved.settings[path]);
      form.elements.dedup_window_from.value = saved.settings.dedup_window_from;
    } catch (error) {
      message.className = "error-text";
      message.replaceChildren(el("strong", {}, error.code), " ", error.detail);
      for (const f of error.fields) {
        const path = f.loc.filter((p) => p !== "body").join(".");
        const slot = form.querySelector(`.field-error[data-field="${path}"]`);
        if (slot) { slot.textContent = f.msg; slot.hidden = false; form.elements[path].setAttribute("aria-invalid", "true"); }
      }
    }
    message.hidden = false;
  } }, el("div", { class: "fields" }, fields, optional, windowFrom, history), message,
    admin ? el("button", { type: "submit", id: "save-settings" }, "Save settings") : "");
  return el("section", { class: "panel" }, el("h2", {}, "Settings"), form);
}

function deleteSection(q) {
  return el("section", { class: "panel danger-zone" }, el("h2", {}, "Delete queue"),
    el("p", { class: "muted" }, `Deletes ${q.name} with every item (of every state), its history and dedup keys, at once.`),
    el("button", { type: "button", class: "danger", id: "delete-queue", onclick: () => deleteDialog(q) }, "Delete queue…"));
}

// The typed-name confirmation, outside <main> so that no refresh takes it away.
function deleteDialog(q) {
  const items = STATES.reduce((n, s) => n + q[s], 0);
  const path = `/queues/${encodeURIComponent(q.name)}`;
  const input = el("input", { id: "confirm-name", autocomplete: "off", spellcheck: "false", "aria-describedby": "delete-what" });
  const problem = el("p", { id: "delete-problem", class: "error-text", role: "alert", hidden: true });
  const remove = async (force) => {
    try {
      await api("DELETE", force ? `${path}?force=true` : path);
      dialog.close();
      administers.delete(q.name);
      go("#/");
    } catch (error) {
      problem.replaceChildren(el("strong", {}, error.code), " ", error.detail,
        ...(error.code === "QueueInUse" ? [" ", el("button", { type: "button", class: "danger", id: "force-delete", onclick: () => remove(true) }, "Force delete")] : []));
      problem.hidden = false;
    }
  };
  const confirmButton = el("button", { type: "submit", class: "danger", id: "confirm-delete", disabled: true }, "Delete");
  input.addEventListener("input", () => { confirmButton.disabled = input.value !== q.name; });
  const dialog = el("dialog", { id: "delete-dialog", "aria-labelledby": "delete-title" },
    el("form", { onsubmit: (event) => { event.preventDefault(); if (input.value === q.name) remove(false); } },
      el("h2", { id: "delete-title" }, `Delete ${q.name}?`),
      el("p", { id: "delete-what" }, `Its ${items} item${items === 1 ? "" : "s"} and ${q.history.completed + q.history.dead} history records go with it; this cannot be undone. Type the queue's name to confirm.`),
      el("label", { for: "confirm-name" }, "Queue name"), input, problem,
      el("div", { class: "toolbar" }, confirmButton, el("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  input.focus();
}

async function settingsPage(show, name) {
  const q = await api("GET", `/queues/${encodeURIComponent(name)}`);
  const admin = await mayAdminister(name);
  if (show.latest()) here = name;
  show(...queueHead(q), cards(q), admin ? toolbar(q, "settings", null) : "", tabsNav(q, "settings"),
    admin ? "" : readOnlyNote("This key may not change this queue: its settings are shown, not editable."),
    settingsForm(q, admin), admin ? deleteSection(q) : "");
}

// --- an item ------------------------------------------------------------------------------------

let payloadAll = null; // the id of the item whose whole payload is asked for

function payloadSection(item) {
  const text = JSON.stringify(item.payload, null, 2);
  const long = text.length > PAYLOAD_SHOWN && payloadAll !== item.id;
  const body = el("pre", { id: "payload", class: "payload", tabindex: "0" }, long ? `${text.slice(0, PAYLOAD_SHOWN)}\n…` : text);
  const more = long ? el("button", { type: "button", class: "secondary", id: "show-all", onclick: () => { payloadAll = item.id; render(); } },
    `Show all (${(text.length / 1024).toFixed(1)} KB)`) : "";
  const details = el("details", { id: "payload-details", open: payloadOpen.get(item.id) ?? true },
    el("summary", {}, "Payload ", el("span", { class: "muted small" }, `${text.length.toLocaleString()} characters${long ? `, first ${PAYLOAD_SHOWN.toLocaleString()} shown` : ""}`)), body, more);
  details.addEventListener("toggle", () => payloadOpen.set(item.id, details.open));
  return el("section", { class: "panel" }, details);
}
const payloadOpen = new Map();

function facts(item) {
  const visible = when(item.visible_at); // ready: when it became poppable; delayed, retrying: when it will
  const rows = [
    ["Queue", el("a", { href: `#/queues/${encodeURIComponent(item.queue)}/${item.status}` }, item.queue)],
    ["State", badge(item.status)],
    ["Attempts", `${item.attempts} of ${item.max_attempts}`],
    ["Priority", item.priority],
    ["Group", item.group ?? el("span", { class: "muted" }, "—")],
    ["Fairness key", item.fairness_key ?? el("span", { class: "muted" }, "—")],
    ["Dedup key", item.dedup_key ?? el("span", { class: "muted" }, "—")],
    ["Created", when(item.created_at)],
    ["First popped", when(item.first_popped_at)],
    ["Visible at", visible],
    ["Leased until", when(item.lease_expires_at)],
    ["Lease", item.lease_token_prefix ? el("code", { class: "id", title: "The first characters of the lease's token: which lease holds it" }, `${item.lease_token_prefix}…`) : el("span", { class: "muted" }, "—")],
    ["Died", when(item.died_at)],
  ];
  return el("dl", { class: "facts", id: "facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
}

function errorsSection(item) {
  const list = item.errors.map((e, n) => el("li", {}, el("div", { class: "error-head" }, `Failure ${n + 1}`, " · ", when(e.at)), el("pre", { class: "error" }, e.error)));
  return el("section", { class: "panel" }, el("h2", {}, `Errors (${item.errors.length})`),
    list.length ? el("ol", { class: "errors", id: "errors" }, list) : el("p", { class: "muted" }, "No error recorded."));
}

function itemActions(item, admin) {
  const base = `/queues/${encodeURIComponent(item.queue)}`;
  if (!admin) return readOnlyNote("This key may look at the item, not act on it: redrive, release and delete need an admin key for its queue.");
  if (item.status === "dead") {
    return el("div", { class: "toolbar" }, act("Redrive", "", `Make item ${item.id} ready again (attempts reset, errors kept)?`, () => api("POST", `${base}/redrive`, { ids: [item.id] }), { id: "item-redrive" }));
  }
  const last = item.attempts >= item.max_attempts;
  return el("div", { class: "toolbar" },
    item.status === "leased"
      ? act("Release", "secondary", `End the lease on item ${item.id} now? Its worker's answer will be refused; ${last ? "this was its last attempt, so it dies" : "it is ready again at once, this attempt counted"}.`,
        () => api("POST", `/items/${item.id}/release`), { id: "item-release" })
      : "",
    act("Delete", "danger", `Delete item ${item.id}? It is finished now (its history records it as completed)${item.status === "leased" ? ", and its worker loses its lease" : ""}.`,
      async () => { await api("DELETE", `/items/${item.id}`); go(`#/queues/${encodeURIComponent(item.queue)}/history`); }, { id: "item-delete" }));
}

async function itemPage(show, id) {
  const item = await api("GET", `/items/${id}`);
  const admin = await mayAdminister(item.queue);
  if (show.latest()) here = item.queue;
  show(el("p", {}, el("a", { href: `#/queues/${encodeURIComponent(item.queue)}/${item.status}` }, `← ${item.queue}`)),
    el("h1", { class: "item-title" }, "Item ", idOf(item.id), " ", badge(item.status)),
    itemActions(item, admin), facts(item), payloadSection(item), errorsSection(item));
}

// --- rendering ----------------------------------------------------------------------------------

let shown = null; // the route of the page on screen
let generation = 0; // each render's number: only the latest one may change the page

function focusKey(node) {
  return node.dataset.key || node.id || node.getAttribute("href") || `${node.tagName}:${node.textContent}`;
}

// Replaces the page, keeping the keyboard's place: the element focused before is focused again.
function replacePage(nodes) {
  const active = document.activeElement;
  const had = active && main.contains(active) && active !== main ? focusKey(active) : null;
  main.replaceChildren(...nodes.flat(Infinity));
  if (!had) return;
  const node = [...main.querySelectorAll("a, button, input, select, [tabindex]")].find((n) => focusKey(n) === had);
  // A button now disabled (Next on the last page) hands the focus to its neighbour (Previous).
  const target = node && node.disabled ? node.parentElement.querySelector("button:not(:disabled), a[href]") : node;
  if (target) target.focus();
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "queues" && parts[1] && parts[2] === "find" && parts[3]) return { page: "find", name: parts[1], text: parts[3] };
  if (parts[0] === "queues" && parts[1]) {
    const tab = [...STATES, "history", "settings"].includes(parts[2]) ? parts[2] : "ready";
    return { page: "queue", name: parts[1], tab };
  }
  if (parts[0] === "items" && parts[1]) return { page: "item", id: parts[1] };
  if (parts[0] === "topics" && parts[1]) return { page: "topic", name: parts[1] };
  if (parts[0] === "topics") return { page: "topics" };
  if (parts[0] === "schedules" && parts[1]) return { page: "schedule", name: parts[1] };
  if (parts[0] === "schedules") return { page: "schedules" };
  return { page: "queues" };
}

async function render() {
  clearTimeout(timer);
  const mine = ++generation;
  const latest = () => mine === generation;
  const show = (...nodes) => { if (latest()) replacePage(nodes); };
  show.latest = latest;
  const hash = location.hash;
  const r = route();
  // A dialog open (deleting a queue) or a form being edited is not refreshed under the user.
  const again = () => { if (latest()) timer = setTimeout(refresh, 5000); };
  try {
    if (r.page === "queue") await queuePage(show, r.name, r.tab);
    else if (r.page === "find") await findPage(show, r.name, r.text);
    else if (r.page === "item") {
      if (!UUID.test(r.id)) throw Object.assign(new Error(), { code: "ItemNotFound" });
      await itemPage(show, r.id.toLowerCase());
    } else if (r.page === "topics") await topicsPage(show);
    else if (r.page === "topic") await topicPage(show, r.name);
    else if (r.page === "schedules") await schedulesPage(show);
    else if (r.page === "schedule") await schedulePage(show, r.name);
    else await queuesPage(show);
    if (!latest()) return;
    shown = hash;
    say("");
  } catch (error) {
    if (!latest()) return; // another page was asked for meanwhile: it renders itself
    if (r.page === "topic" && error.code === "TopicNotFound") {
      notFound(show, "Topic", "There is no topic by that name (it may have been deleted).");
      shown = hash;
      say("");
    } else if (r.page === "schedule" && error.code === "ScheduleNotFound") {
      notFound(show, "Schedule", "There is no schedule by that name (it may have been deleted).", ["#/schedules", "Schedules"]);
      shown = hash;
      say("");
    } else if ((r.page === "queue" || r.page === "find") && error.code === "QueueNotFound") {
      notFound(show, "Queue", "There is no queue by that name (it may have been deleted).");
      shown = hash;
      say("");
    } else if (r.page === "item" && error.code === "ItemNotFound") {
      notFound(show, "Item", "There is no item with that id: it may have completed or been deleted (a finished item leaves only a record in its queue's history).");
      shown = hash;
      say("");
    } else {
      if (shown !== hash) { main.replaceChildren(); shown = null; here = null; } // nothing of another page stays
      say(error);
    }
  }
  again();
}

function refresh() {
  const editing = document.querySelector("dialog[open]") || (route().tab === "settings" && main.querySelector("#settings"));
  if (editing) { timer = setTimeout(refresh, 5000); return; }
  render();
}

window.addEventListener("hashchange", () => { say(""); render(); });
render();
