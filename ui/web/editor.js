// editor.js - the query box every view uses: Enter runs, a parse error is shown with a caret
// under the column the server named, and an optional completer offers words at the cursor
// (arrow keys move, Tab or Enter takes one, Escape closes the list).

import { h } from "./dom.js";
import { errorPosition, ApiError } from "./api.js";
import { rangeOf } from "./time.js";

// opts: {value, placeholder, label, onRun(text), complete(text, cursor) -> Promise<{from, items}>}
export function queryBox(opts) {
  const input = h("input.query", { type: "text", value: opts.value || "", placeholder: opts.placeholder || "",
    spellcheck: false, autocomplete: "off", "aria-label": opts.label || "query" });
  const list = h("ul.complete");
  list.hidden = true;
  const err = h("div.qerror");
  err.hidden = true;
  const run = h("button.run", { type: "button", on: { click: () => opts.onRun(input.value) } }, "Run");
  const el = h("div.qbox", h("div.qline", h("div.qinput", input, list), run), err);
  let items = [], sel = -1, from = 0, seq = 0;

  const close = () => { list.hidden = true; items = []; sel = -1; };
  const take = (i) => {
    const v = input.value, cur = input.selectionStart;
    input.value = v.slice(0, from) + items[i] + v.slice(cur);
    const pos = from + items[i].length;
    input.setSelectionRange(pos, pos);
    close();
  };
  const show = () => {
    list.replaceChildren(...items.map((it, i) => h("li", { className: i === sel ? "sel" : "", on: { mousedown: (e) => { e.preventDefault(); take(i); } } }, it)));
    list.hidden = items.length === 0;
  };
  if (opts.complete) {
    input.addEventListener("input", async () => {
      const my = ++seq;
      const r = await opts.complete(input.value, input.selectionStart).catch(() => null);
      if (my !== seq || !r) return;
      items = r.items.slice(0, 50);
      from = r.from;
      sel = -1;
      show();
    });
    input.addEventListener("blur", close);
  }
  input.addEventListener("keydown", (e) => {
    if (!list.hidden && items.length) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        sel = (sel + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
        show();
        return;
      }
      if (e.key === "Tab" || (e.key === "Enter" && sel >= 0)) {
        e.preventDefault();
        take(sel >= 0 ? sel : 0);
        return;
      }
      if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        close();
        return;
      }
    }
    if (e.key === "Enter") {
      e.preventDefault();
      close();
      opts.onRun(input.value);
    }
  });

  return {
    el, input,
    showError(msg) {
      const pos = errorPosition(msg);
      err.replaceChildren(h("div.msg", msg));
      if (pos) {
        const line = input.value.split("\n")[pos.line - 1] ?? "";
        err.dataset.line = String(pos.line);
        err.dataset.col = String(pos.col);
        err.append(h("pre.caret", `${line}\n${" ".repeat(Math.max(0, pos.col - 1))}^ line ${pos.line}, column ${pos.col}`));
        const off = input.value.split("\n").slice(0, pos.line - 1).join("\n").length + (pos.line > 1 ? 1 : 0) + pos.col - 1;
        input.setSelectionRange(off, Math.min(input.value.length, off + 1));
      } else {
        delete err.dataset.col;
      }
      err.hidden = false;
      input.classList.add("bad");
    },
    clearError() {
      err.hidden = true;
      err.replaceChildren();
      input.classList.remove("bad");
    },
  };
}

// A message line for a failed call that is not about the query text (network, 5xx).
export function notice(text, kind = "error") {
  return h(`div.notice.${kind}`, text);
}

// The range the URL parameters |p| name, or null after saying in |host| why there is none.
export function rangeOr(p, host) {
  try {
    return rangeOf(p);
  } catch (e) {
    host.append(notice(e.message));
    return null;
  }
}

// What a view does with a failed call: nothing when it was aborted (the view went away), the
// message under the query box with its position for a 400 (a parse or parameter error), a
// notice in |host| otherwise.
export function failTo(box, host) {
  return (e) => {
    if (e.name === "AbortError") return;
    if (e instanceof ApiError && e.status === 400) box.showError(e.message);
    else host.append(notice(e.message));
  };
}
