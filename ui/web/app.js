// app.js - the page: the views (Logs, Traces, a trace, Metrics, Status), the URL that holds
// each view's query and range (history API: the back button goes to the previous query),
// the theme and the query token.

import { whenUnauthorized, setToken, token } from "./api.js";
import * as logs from "./logs.js";
import * as traces from "./traces.js";
import * as trace from "./trace.js";
import * as metrics from "./metrics.js";
import * as status from "./status.js";

const VIEWS = { logs, traces, trace, metrics, status };
const TITLES = { logs: "Logs", traces: "Traces", trace: "Trace", metrics: "Metrics", status: "Status" };
// The parameters a view switch carries over (the time range).
const SHARED = ["from", "to"];
let current = null;

export function params() {
  return new URLSearchParams(location.search);
}

// Changes the URL by |update| (null or "" removes a key) and renders the view it names.
// A new URL is a new history entry unless |replace|.
function navigate(update, replace = false) {
  const p = update instanceof URLSearchParams ? update : params();
  if (!(update instanceof URLSearchParams)) {
    for (const [k, v] of Object.entries(update)) {
      if (v === null || v === undefined || v === "") p.delete(k);
      else p.set(k, String(v));
    }
  }
  const url = `${location.pathname}?${p}`;
  if (url !== location.pathname + location.search) history[replace ? "replaceState" : "pushState"](null, "", url);
  render();
}

// A link to another view, keeping the time range.
function viewParams(view, extra = {}) {
  const p = new URLSearchParams({ view });
  const cur = params();
  for (const k of SHARED) if (cur.get(k)) p.set(k, cur.get(k));
  for (const [k, v] of Object.entries(extra)) if (v !== undefined && v !== "") p.set(k, v);
  return p;
}

const ctx = { navigate, viewParams, open: (view, extra) => navigate(viewParams(view, extra)) };

function render() {
  if (current && current.unmount) current.unmount();
  current = null;
  const p = params();
  const name = VIEWS[p.get("view")] ? p.get("view") : "logs";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === (name === "trace" ? "traces" : name));
  document.title = `${TITLES[name]} · MiraDB`;
  const root = document.getElementById("view");
  root.replaceChildren();
  root.className = `view-${name}`;
  current = VIEWS[name].render(root, p, ctx) || null;
}

function setTheme(t) {
  document.documentElement.dataset.theme = t;
  localStorage.setItem("miradb.theme", t);
}

function init() {
  const saved = localStorage.getItem("miradb.theme");
  setTheme(saved || (matchMedia("(prefers-color-scheme: light)").matches ? "light" : "dark"));
  document.getElementById("theme").addEventListener("click", () => {
    setTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
    render();
  });
  for (const a of document.querySelectorAll("#nav a")) {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      navigate(viewParams(a.dataset.view));
    });
  }
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  form.hidden = !token();
  input.value = token();
  whenUnauthorized(() => { form.hidden = false; input.focus(); });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    render();
  });
  addEventListener("popstate", render);
  addEventListener("keydown", (e) => {
    if (e.key === "Escape" && current && current.escape) current.escape();
  });
  render();
}

init();
