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
    throw new Error(`${code}: ${detail}`);
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

async function queuesPage() {
  const { queues } = await api("GET", "/queues");
  const rows = queues.map((q) => el("tr", { class: "link", "data-queue": q.name, onclick: () => { location.hash = `#/queues/${encodeURIComponent(q.name)}`; } },
    el("td", {}, el("strong", {}, q.name), " ", el("span", { class: `badge ${q.paused ? "paused" : "live"}` }, q.paused ? "paused" : "live")),
    el("td", { class: "num" }, q.ready), el("td", { class: "num" }, q.leased), el("td", { class: "num" }, q.delayed),
    el("td", { class: "num" }, q.retrying), el("td", { class: `num ${q.dead ? "dead" : ""}` }, q.dead),
    el("td", { class: "num" }, age(q.oldest_ready_age_seconds)),
    el("td", { class: "num" }, q.history.completed)));
  main.replaceChildren(
    el("h1", {}, "Queues"),
    el("p", { class: "muted" }, `${queues.length} queue${queues.length === 1 ? "" : "s"}; refreshed every 5 seconds.`),
    queues.length === 0 ? el("p", {}, "No queue yet: push an item and it appears here.") :
      el("table", { id: "queues" },
        el("thead", {}, el("tr", {}, el("th", {}, "Queue"), ...["Ready", "Leased", "Delayed", "Retrying", "Dead", "Oldest ready", "Completed"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, rows)));
}

async function queuePage(name, state) {
  const q = await api("GET", `/queues/${encodeURIComponent(name)}`);
  const items = state === "dead"
    ? await api("GET", `/queues/${encodeURIComponent(name)}/dead?limit=50`)
    : await api("GET", `/queues/${encodeURIComponent(name)}/items?state=${state}&limit=50`);
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
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← Queues")),
    el("h1", {}, name, " ", el("span", { class: `badge ${q.paused ? "paused" : "live"}` }, q.paused ? "paused" : "live")),
    cards, toolbar, tabs,
    items.items.length === 0 ? el("p", { class: "muted" }, `No ${state} items.`) :
      el("table", { id: "items" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    items.next_cursor ? el("p", { class: "muted" }, "Showing the first 50.") : "");
}

async function render() {
  clearTimeout(timer);
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "queues" && parts[1]) await queuePage(parts[1], STATES.includes(parts[2]) ? parts[2] : "ready");
    else await queuesPage();
    say("");
  } catch (error) {
    say(error.message.startsWith("Unauthorized") ? `${error.message} — enter an admin API key above.` : error.message);
  }
  timer = setTimeout(render, 5000);
}

window.addEventListener("hashchange", render);
render();
