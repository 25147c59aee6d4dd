"""The style sheet and the small script embedded in every ``rewind report`` page.

Why it exists: the page must work offline as one file, so its CSS and JavaScript are inlined at
render time. They live here as Python strings (not loose files) so that they ship inside the
package like any module.

Invariants:
- No URL, import, ``fetch`` or other network reference: the page never loads anything.
- The script only reads data the page itself carries (the ``#patches`` block: base64 of a gzip'd
  JSON array of patch texts, unpacked once with the browser's ``DecompressionStream``) and writes
  DOM built from it with every character escaped; it never evaluates page data as code.
- The script renders a patch exactly as :mod:`ledger.review.html_diff` does in Python: lines split
  on ``\\n`` only, one table row per patch line, the line's text (marker included) in the last
  cell, control and line-separator characters shown as a visible glyph with the character itself
  kept in a hidden ``<i>`` so the text content equals the patch line.
- The side-by-side view is built from a unified table's own nodes (cloned, never re-parsed from
  HTML text, so a CR in a line stays a CR), and switching back restores the very same table.
- What the script keeps in the browser: only the "viewed" marks, in ``localStorage`` under one
  key per session (``rewind-report-viewed:<session id>``), a JSON object whose keys are the
  step's entry id, the file's place in the step and its name; a storage that refuses (private
  mode, quota) costs only the marks' persistence. Every text the user types is shown with
  ``textContent``, never as HTML.
- Where you are is found without laying out the whole page: prompts by bisection on their
  boxes (which stay in order while ``content-visibility`` skips their content), turns and files
  only inside the current prompt, at most once per animation frame.
"""

from __future__ import annotations

CSS = """
*{box-sizing:border-box}[hidden]{display:none!important}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f6f8fa;color:#1f2328;
display:grid;grid-template-columns:minmax(220px,330px) 1fr;grid-template-rows:auto 1fr;height:100vh}
header{grid-column:1/3;background:#24292f;color:#fff;padding:10px 18px}header h1{margin:0;font-size:18px}
header p{margin:2px 0 0;color:#d0d7de;font-size:12px}
nav{overflow:auto;border-right:1px solid #d0d7de;background:#fff;font-size:12px;min-height:0}
nav .bar{position:sticky;top:0;background:#fff;padding:8px;border-bottom:1px solid #d0d7de;z-index:1}
nav .bar input[type=search]{width:100%;padding:4px 6px;font:inherit;margin-bottom:6px}
nav .bar button{font:inherit;padding:2px 8px;margin-right:4px}nav .bar label{white-space:nowrap}
nav ol,nav ul{list-style:none;margin:0;padding:0}nav li.np{padding:4px 8px;border-bottom:1px solid #eaeef2}
nav li.np>a{font-weight:600;color:#0969da}nav li.nt{margin:2px 0 2px 10px}nav li.nt>a{color:#1f2328}
nav ul.nf{margin-left:14px}nav ul.nf a{color:#57606a;font-family:ui-monospace,monospace;word-break:break-all}
nav a{text-decoration:none}nav a:hover{text-decoration:underline}nav details>summary{color:#57606a;cursor:pointer}
nav .count{color:#57606a;margin-left:4px}
nav .views{display:inline-block;margin-top:4px;white-space:nowrap}nav .views button[aria-pressed=true]{background:#0969da;color:#fff;border-color:#0969da}
nav a.cur{background:#fff8c5;border-radius:3px;outline:1px solid #d4a72c}nav li.nf.seen>a::before{content:"\\2713  ";color:#1a7f37}
.vw{float:right;font:12px system-ui,sans-serif;color:#57606a;cursor:pointer;user-select:none}.vw input{margin:0 4px 0 0;vertical-align:-2px}
.file.viewed>summary{opacity:.75}.file.viewed .vw{color:#1a7f37}#nomatch{font-size:14px}
main{overflow:auto;padding:12px 20px;min-height:0}
.prompt{background:#fff;border:1px solid #d0d7de;border-left:4px solid #0969da;border-radius:6px;margin:0 0 16px;
padding:10px 14px;content-visibility:auto;contain-intrinsic-size:auto 800px}
.prompt>h2{font-size:15px;margin:0 0 4px}.prompt pre.text{white-space:pre-wrap;margin:4px 0;font:inherit}
.meta{color:#57606a;font-size:12px;font-weight:400}.summary{color:#1a7f37;margin:4px 0}.totals{font-size:12px;color:#57606a}
.tools{font:12px ui-monospace,monospace;color:#6639ba;margin:2px 0;padding:0;list-style:none}
.tools li{display:inline-block;background:#fbefff;border-radius:4px;padding:0 6px;margin:1px 4px 1px 0}
.tag{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;margin-left:6px}
.label{background:#ddf4ff;color:#0969da}.fork{background:#fff8c5;color:#9a6700}
.turn{border-top:1px dashed #d0d7de;margin-top:8px;padding-top:6px}.turn h3{font-size:13px;margin:0 0 2px}
.file{border:1px solid #d0d7de;border-radius:6px;margin:6px 0;overflow:hidden;background:#fff}
.file>summary{background:#f6f8fa;padding:4px 10px;cursor:pointer;font:12px ui-monospace,monospace}
.file:target,.turn:target,.prompt:target{outline:2px solid #bf8700}
.kind{display:inline-block;background:#eaeef2;border-radius:4px;padding:0 5px;margin-left:6px;color:#57606a}
.add{color:#1a7f37}.del{color:#cf222e}
table.diff{border-collapse:collapse;width:100%;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;
table-layout:fixed;tab-size:4}table.diff td{padding:0 6px;vertical-align:top;white-space:pre-wrap;word-break:break-all}
table.diff td.n{color:#8c959f;text-align:right;user-select:none;white-space:nowrap;overflow:hidden;word-break:normal}
col.nc{width:calc(3ch + 14px)}
tr.a td:last-child,td.c.a{background:#e6ffec}tr.d td:last-child,td.c.d{background:#ffebe9}
tr.h td{background:#ddf4ff;color:#57606a}tr.x td{color:#57606a}td.e{background:#f6f8fa}
tr.m{display:none}body.hdr tr.m{display:table-row}tr.m td{color:#57606a;background:#f6f8fa}
.cc::before{content:attr(data-g);color:#cf222e;background:#fff8c5;border-radius:2px;font-size:10px;padding:0 1px}
.cc i{display:none}.note{padding:6px 10px;color:#57606a;font-size:12px}
@media (max-width:800px){body{display:block;height:auto}nav{max-height:40vh}main{overflow:visible}}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var GLYPH = {"\r": "CR", "\x0b": "VT", "\x0c": "FF", "\x1c": "FS", "\x1d": "GS", "\x1e": "RS",
    "\x1f": "US", "\x7f": "DEL", "\u2028": "LS", "\u2029": "PS"};
  var SPECIAL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]/g;
  var HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))?/;
  function glyph(c) {
    var n = c.charCodeAt(0);
    if (GLYPH[c]) return GLYPH[c];
    if (n < 32) return "^" + String.fromCharCode(n + 64);
    if (n >= 0xdc80 && n <= 0xdcff) return "\\x" + (n - 0xdc00).toString(16);
    return "U+" + ("000" + n.toString(16).toUpperCase()).slice(-4);
  }
  function esc(s) {
    return s.replace(/[&<>"]/g, function (c) {
      return c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : "&quot;";
    }).replace(SPECIAL, function (c) {
      var n = c.charCodeAt(0);
      var inner = c === "\r" ? "&#13;" : (n === 0 || (n >= 0xd800 && n <= 0xdfff)) ? "\ufffd" : c;
      return '<span class="cc" data-g="' + glyph(c) + '"><i>' + inner + "</i></span>";
    });
  }
  // A unified table, one row per patch line, as html_diff.diff_table writes it in Python.
  function table(patch) {
    var lines = patch.split("\n"), out = [], o = 0, n = 0, top = 0, inHunk = false;
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    function full(cls, text) {
      out.push('<tr class="' + cls + '"><td colspan="3">' + esc(text) + "</td></tr>");
    }
    lines.forEach(function (line) {
      var mark = line.charAt(0);
      if (line.slice(0, 5) === "diff ") { inHunk = false; full("m", line); }
      else if (line.slice(0, 2) === "@@") {
        var m = HUNK.exec(line);
        o = m ? +m[1] : 0; n = m ? +m[3] : 0; inHunk = true;
        if (m) top = Math.max(top, o + (m[2] === undefined ? 1 : +m[2]), n + (m[4] === undefined ? 1 : +m[4]));
        full("h", line);
      } else if (inHunk && (mark === " " || mark === "+" || mark === "-")) {
        var a = mark === "+" ? "" : o++, b = mark === "-" ? "" : n++;
        out.push('<tr class="' + (mark === "+" ? "a" : mark === "-" ? "d" : "") + '"><td class="n">' +
          a + '</td><td class="n">' + b + '</td><td class="c">' + esc(line) + "</td></tr>");
      } else { full(inHunk || line.slice(0, 13) === "Binary files " ? "x" : "m", line); }
    });
    var digits = Math.min(12, Math.max(3, String(top).length));
    return '<table class="diff g' + digits + '"><colgroup><col class="nc"><col class="nc"><col></colgroup>' +
      out.join("") + "</table>";
  }
  // Side by side, built from a unified table's rows (the page carries one table per diff): a
  // run of deletions is paired with the run of additions after it; the code cells are copies.
  function split(u) {
    var s = document.createElement("table"), body = document.createElement("tbody");
    var left = [], right = [];
    s.className = u.className;
    s.innerHTML = '<colgroup><col class="nc"><col><col class="nc"><col></colgroup>';
    function side(tr, pair, cls) {
      var num = document.createElement("td"), code;
      num.className = "n";
      if (pair) {
        num.textContent = pair[0];
        code = pair[1].cloneNode(true);  // nodes, not innerHTML: a CR inside must stay a CR
        code.className = "c " + cls;
      } else { code = document.createElement("td"); code.className = "e"; }
      tr.appendChild(num); tr.appendChild(code);
    }
    function flush() {
      for (var i = 0; i < Math.max(left.length, right.length); i++) {
        var tr = document.createElement("tr");
        side(tr, left[i], "d"); side(tr, right[i], "a");
        body.appendChild(tr);
      }
      left = []; right = [];
    }
    for (var i = 0; i < u.rows.length; i++) {
      var row = u.rows[i], cells = row.cells;
      if (cells.length === 1) {
        flush();
        var copy = row.cloneNode(true);
        copy.cells[0].colSpan = 4;
        body.appendChild(copy);
      } else if (row.className === "d") { left.push([cells[0].textContent, cells[2]]); }
      else if (row.className === "a") { right.push([cells[1].textContent, cells[2]]); }
      else {
        flush();
        var tr = document.createElement("tr");
        side(tr, [cells[0].textContent, cells[2]], "");
        side(tr, [cells[1].textContent, cells[2]], "");
        body.appendChild(tr);
      }
    }
    flush();
    s.appendChild(body);
    return s;
  }
  function sbs() { return document.body.classList.contains("sbs"); }
  // Show one table in the page's current view (the other view is kept to switch back).
  function view(t) {
    var want = sbs();
    if (!!t.__split === want) return;
    var other = t.__other || (want ? split(t) : null);
    if (!other) return;
    other.__split = want; other.__other = t; t.__other = other;
    t.replaceWith(other);
  }
  function setView(split) {
    document.body.classList.toggle("sbs", split);
    document.getElementById("unified").setAttribute("aria-pressed", String(!split));
    document.getElementById("split").setAttribute("aria-pressed", String(split));
    document.querySelectorAll("main table.diff").forEach(view);
    locate();
  }
  var packed = null;
  function unpack() {
    if (!packed) {
      var block = document.getElementById("patches");
      if (!block || typeof DecompressionStream === "undefined") {
        packed = Promise.reject(new Error("this browser cannot unpack the collapsed diffs " +
          "(no DecompressionStream); rewind show prints them"));
      } else {
        var bin = atob(block.textContent.trim()), bytes = new Uint8Array(bin.length);
        for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
        var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        packed = new Response(stream).text().then(JSON.parse);
      }
    }
    return packed;
  }
  function render(d) {
    if (!d.classList.contains("lazy") || d.hasAttribute("data-r")) return;
    d.setAttribute("data-r", "");
    var note = d.getAttribute("data-note");
    unpack().then(function (all) {
      var patch = all[+d.getAttribute("data-i")];
      d.insertAdjacentHTML("beforeend", (patch ? table(patch) : "") +
        (note ? '<div class="note">' + esc(note) + "</div>" : ""));
      d.classList.remove("lazy");
      var t = d.querySelector("table.diff");
      if (t) view(t);
    }, function (err) {
      d.insertAdjacentHTML("beforeend", '<div class="note">' + esc(String(err.message)) + "</div>");
    });
  }
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.open && d.classList && d.classList.contains("lazy")) render(d);
  }, true);
  function reveal(id) {
    var el = id && document.getElementById(id);
    if (!el) return;
    if (el.tagName === "DETAILS") { el.open = true; render(el); }
    el.scrollIntoView({block: "start"});
  }
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[href^='#']");
    if (a && a.getAttribute("href").slice(1) === location.hash.slice(1)) reveal(a.getAttribute("href").slice(1));
  });
  function setAll(open) {
    document.querySelectorAll("main details.file").forEach(function (d) {
      if (!d.closest("[hidden]")) { d.open = open; if (open) render(d); }
    });
  }

  // -- the filter: a text that names a file shows just the files it names (their turns and
  // prompts as headings); any other text keeps the prompts and turns whose words match, with
  // all their files; no match at all says so.
  var timer = 0;
  function name(f) { return f.firstChild.textContent.toLowerCase(); }
  function filter() {
    var q = document.getElementById("q").value.trim().toLowerCase(), shown = 0;
    var files = q ? [].some.call(document.querySelectorAll("nav li.nf"), function (f) {
      return name(f).indexOf(q) >= 0;
    }) : false;
    document.querySelectorAll("nav li.np").forEach(function (p) {
      var pm = !files && (!q || p.getAttribute("data-q").indexOf(q) >= 0), anyP = pm;
      p.querySelectorAll("li.nt").forEach(function (t) {
        var tm = !files && (pm || t.getAttribute("data-q").indexOf(q) >= 0), anyT = tm;
        t.querySelectorAll("li.nf").forEach(function (f) {
          var fm = tm || (files && name(f).indexOf(q) >= 0);
          show(f, fm); anyT = anyT || fm;
        });
        var box = t.querySelector("details");
        if (box && q) box.open = anyT && !tm;
        show(t, anyT); anyP = anyP || anyT;
      });
      p.querySelectorAll(":scope > .pf li.nf").forEach(function (f) {
        var fm = pm || (files && name(f).indexOf(q) >= 0);
        show(f, fm); anyP = anyP || fm;
      });
      show(p, anyP);
      if (anyP) shown++;
    });
    var none = document.querySelectorAll("#none, #nomatch"), raw = document.getElementById("q").value.trim();
    none.forEach(function (el) {
      el.textContent = "Nothing matches \u201c" + raw + "\u201d: no file name, tool or prompt contains it.";
      el.hidden = !(q && !shown);
    });
    prompts = null;
    locate();
  }
  function show(item, on) {
    item.hidden = !on;
    var link = item.querySelector("a"), target = link && document.getElementById(decodeURIComponent(link.getAttribute("href").slice(1)));
    if (target) target.hidden = !on;
  }

  // -- where you are: the prompt, turn and file at the top of the main column are marked in the
  // navigation pane, which scrolls to keep them in sight. Prompts are found by bisection (their
  // boxes stay in order even when the browser skips laying out their content); turns and files
  // only within the current prompt, which is on screen and laid out.
  var links = {}, prompts = null, marked = [], queued = false;
  function visibleIn(list) {
    return [].filter.call(list, function (el) { return !el.hidden; });
  }
  function last(list, y) {
    var lo = 0, hi = list.length - 1, found = null;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (list[mid].getBoundingClientRect().top <= y) { found = list[mid]; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
  }
  function locate() {
    queued = false;
    var main = document.querySelector("main");
    if (!prompts) prompts = visibleIn(main.querySelectorAll("section.prompt"));
    var y = Math.max(main.getBoundingClientRect().top, 0) + 8;
    var p = last(prompts, y) || prompts[0], t = null, f = null;  // at the very top: the first
    if (p) {
      t = last(visibleIn(p.querySelectorAll(":scope > div.turn")), y);
      var within = last(visibleIn((t || p).querySelectorAll("details.file")), y);
      if (within && within.getBoundingClientRect().bottom > y && !within.closest("[hidden]")) f = within;
    }
    marked.forEach(function (a) { a.classList.remove("cur"); a.removeAttribute("aria-current"); });
    marked = [p, t, f].map(function (el) { return el && links[el.id]; }).filter(Boolean);
    marked.forEach(function (a) { a.classList.add("cur"); a.setAttribute("aria-current", "location"); });
    var deepest = marked.filter(function (a) { return !a.closest("details:not([open])"); }).pop();
    if (deepest) keepInSight(deepest);
  }
  function keepInSight(a) {
    var nav = document.querySelector("nav"), bar = nav.querySelector(".bar");
    var box = nav.getBoundingClientRect(), r = a.getBoundingClientRect();
    var top = box.top + bar.offsetHeight;
    // Out of sight: brought to a third of the way down, with the entries around it.
    if (r.top < top || r.bottom > box.bottom) nav.scrollTop += r.top - top - (box.bottom - top) / 3;
  }
  function later() {
    if (!queued) { queued = true; requestAnimationFrame(locate); }
  }

  // -- viewed marks, as on GitHub: a checkbox per file, kept in the browser's storage under the
  // session, the step's entry id, the file's place in the step and its name (a regenerated
  // report of the same session keeps them); a viewed file is collapsed.
  var storeKey = "rewind-report-viewed:" + (document.body.getAttribute("data-s") || ""), seen = {};
  function load() {
    try { seen = JSON.parse(localStorage.getItem(storeKey) || "{}") || {}; } catch (e) { seen = {}; }
  }
  function save() {
    try { localStorage.setItem(storeKey, JSON.stringify(seen)); } catch (e) { /* storage off: marks last this visit */ }
  }
  var all = [];
  function count() {
    var n = all.filter(function (d) { return d.classList.contains("viewed"); }).length;
    document.getElementById("seen").textContent = all.length ? n + " / " + all.length + " viewed" : "";
  }
  function mark(d, on) {
    d.classList.toggle("viewed", on);
    d.querySelector(".vw input").checked = on;
    var a = links[d.id];
    if (a) a.parentNode.classList.toggle("seen", on);
  }
  function setupViewed() {
    load();
    var order = {};
    // One label cloned per file (not written into the page: no bytes per file; a clone costs a
    // third of parsing HTML per file: ~40 ms for 2,000 files).
    var box = document.createElement("label");
    box.className = "vw";
    box.title = "Mark as viewed (kept by this browser)";
    box.innerHTML = '<input type="checkbox">Viewed';
    all = [].slice.call(document.querySelectorAll("main details.file"));
    all.forEach(function (d) {
      var step = d.closest("div.turn, section.prompt"), sid = step ? step.id : "";
      order[sid] = (order[sid] || 0) + 1;
      d.__key = sid + "/" + order[sid] + "/" + d.getAttribute("data-p");
      d.firstElementChild.appendChild(box.cloneNode(true));
      if (seen[d.__key]) { mark(d, true); d.open = false; }
    });
    count();
    document.querySelector("main").addEventListener("change", function (e) {
      var box = e.target, d = box.closest && box.closest(".vw") && box.closest("details.file");
      if (!d) return;
      mark(d, box.checked);
      d.open = !box.checked;
      if (d.open) render(d);
      load();  // another tab may have marked files since: merge with its marks, do not overwrite
      if (box.checked) seen[d.__key] = 1; else delete seen[d.__key];
      save(); count();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("nav a[href^='#']").forEach(function (a) {
      links[decodeURIComponent(a.getAttribute("href").slice(1))] = a;
    });
    document.getElementById("q").addEventListener("input", function () {
      clearTimeout(timer); timer = setTimeout(filter, 120);
    });
    document.getElementById("open").addEventListener("click", function () { setAll(true); });
    document.getElementById("close").addEventListener("click", function () { setAll(false); });
    document.getElementById("hdr").addEventListener("change", function (e) {
      document.body.classList.toggle("hdr", e.target.checked);
    });
    document.getElementById("unified").addEventListener("click", function () { setView(false); });
    document.getElementById("split").addEventListener("click", function () { setView(true); });
    if (sbs()) document.querySelectorAll("main table.diff").forEach(view);
    setupViewed();
    document.querySelector("main").addEventListener("scroll", later, {passive: true});
    window.addEventListener("scroll", later, {passive: true});
    window.addEventListener("resize", later);
    document.addEventListener("toggle", later, true);
    if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
  });
  // The first "where you are" after the load event: measuring boxes forces a layout, which the
  // browser would otherwise do after the load (no extra work, only not delaying the load event).
  window.addEventListener("load", later);
})();
"""

__all__ = ["CSS", "SCRIPT"]
