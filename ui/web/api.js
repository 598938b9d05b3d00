// api.js - every call the UI makes to the daemon: same origin, JSON or text, with the query
// token (kept in sessionStorage) as a Bearer header when one is set. A failed call throws
// ApiError carrying the status and the server's message (Loki and Tempo send plain text,
// Prometheus a JSON envelope with "error").

const TOKEN_KEY = "miradb.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// Called with the ApiError of every 401, so the page can ask for a token.
let onUnauthorized = () => {};
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

// GET |path| with query parameters |params| (undefined and "" values are left out).
// |signal| aborts it. Resolves to parsed JSON, or text when the answer is not JSON.
export async function get(path, params = {}, signal = undefined) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "") u.searchParams.set(k, String(v));
  }
  const headers = {};
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const r = await fetch(u, { headers, signal });
  const ctype = r.headers.get("content-type") || "";
  if (!r.ok) {
    let msg = (await r.text()).trim();
    if (ctype.startsWith("application/json")) {
      try {
        const j = JSON.parse(msg);
        msg = j.error || j.message || msg;
      } catch {
        // keep the text
      }
    }
    const e = new ApiError(r.status, msg || `HTTP ${r.status}`);
    if (r.status === 401) onUnauthorized(e);
    throw e;
  }
  return ctype.startsWith("application/json") ? r.json() : r.text();
}

// The position a parse error names, as {line, col} (1-based), or null. The three dialects:
// Loki and TraceQL "parse error at line 1, col 12", Prometheus "1:17: parse error".
export function errorPosition(msg) {
  let m = /line (\d+), col (\d+)/.exec(msg);
  if (!m) m = /^(\d+):(\d+):/.exec(msg);
  return m ? { line: Number(m[1]), col: Number(m[2]) } : null;
}
