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
table.diff td.n{color:#8c959f;text-align:right;user-select:none}col.nc{width:3.5em}
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
  function rows(patch, sbs) {
    var lines = patch.split("\n"), out = [], o = 0, n = 0, inHunk = false;
    var cols = sbs ? 4 : 3, left = [], right = [];
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    function full(cls, text) {
      out.push('<tr class="' + cls + '"><td colspan="' + cols + '">' + esc(text) + "</td></tr>");
    }
    function flush() {
      for (var i = 0; i < Math.max(left.length, right.length); i++) {
        var l = left[i], r = right[i];
        out.push("<tr>" + (l ? '<td class="n">' + l[0] + '</td><td class="c d">' + esc(l[1]) + "</td>"
          : '<td class="n"></td><td class="e"></td>') + (r ? '<td class="n">' + r[0] +
          '</td><td class="c a">' + esc(r[1]) + "</td>" : '<td class="n"></td><td class="e"></td>') + "</tr>");
      }
      left = []; right = [];
    }
    lines.forEach(function (line) {
      var mark = line.charAt(0);
      if (line.slice(0, 5) === "diff ") { flush(); inHunk = false; full("m", line); }
      else if (line.slice(0, 2) === "@@") {
        flush();
        var m = /^@@ -(\d+)(?:,\d+)? \+(\d+)/.exec(line);
        o = m ? +m[1] : 0; n = m ? +m[2] : 0; inHunk = true;
        full("h", line);
      } else if (inHunk && (mark === " " || mark === "+" || mark === "-")) {
        if (!sbs) {
          var a = mark === "+" ? "" : o++, b = mark === "-" ? "" : n++;
          out.push('<tr class="' + (mark === "+" ? "a" : mark === "-" ? "d" : "") + '"><td class="n">' +
            a + '</td><td class="n">' + b + '</td><td class="c">' + esc(line) + "</td></tr>");
        } else if (mark === "-") { left.push([o++, line]); }
        else if (mark === "+") { right.push([n++, line]); }
        else {
          flush();
          out.push('<tr><td class="n">' + o++ + '</td><td class="c">' + esc(line) + '</td><td class="n">' +
            n++ + '</td><td class="c">' + esc(line) + "</td></tr>");
        }
      } else { flush(); full(inHunk || line.slice(0, 13) === "Binary files " ? "x" : "m", line); }
    });
    flush();
    return out.join("");
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
    var sbs = document.body.classList.contains("sbs");
    var cols = sbs ? '<col class="nc"><col><col class="nc"><col>' : '<col class="nc"><col class="nc"><col>';
    var note = d.getAttribute("data-note");
    unpack().then(function (all) {
      var patch = all[+d.getAttribute("data-i")];
      d.insertAdjacentHTML("beforeend", (patch ? '<table class="diff"><colgroup>' + cols + "</colgroup>" +
        rows(patch, sbs) + "</table>" : "") + (note ? '<div class="note">' + esc(note) + "</div>" : ""));
      d.classList.remove("lazy");
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
  var timer = 0;
  function filter() {
    var q = document.getElementById("q").value.trim().toLowerCase();
    document.querySelectorAll("nav li.np").forEach(function (p) {
      var pm = !q || p.getAttribute("data-q").indexOf(q) >= 0, anyP = pm;
      p.querySelectorAll("li.nt").forEach(function (t) {
        var tm = pm || t.getAttribute("data-q").indexOf(q) >= 0, anyT = tm;
        t.querySelectorAll("li.nf").forEach(function (f) {
          var fm = tm || f.firstChild.textContent.toLowerCase().indexOf(q) >= 0;
          show(f, fm); anyT = anyT || fm;
        });
        var box = t.querySelector("details");
        if (box && q) box.open = anyT && !tm;
        show(t, anyT); anyP = anyP || anyT;
      });
      p.querySelectorAll(":scope > .pf li.nf").forEach(function (f) {
        var fm = pm || f.firstChild.textContent.toLowerCase().indexOf(q) >= 0;
        show(f, fm); anyP = anyP || fm;
      });
      show(p, anyP);
    });
  }
  function show(item, on) {
    item.hidden = !on;
    var link = item.querySelector("a"), target = link && document.getElementById(link.getAttribute("href").slice(1));
    if (target) target.hidden = !on;
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("q").addEventListener("input", function () {
      clearTimeout(timer); timer = setTimeout(filter, 120);
    });
    document.getElementById("open").addEventListener("click", function () { setAll(true); });
    document.getElementById("close").addEventListener("click", function () { setAll(false); });
    document.getElementById("hdr").addEventListener("change", function (e) {
      document.body.classList.toggle("hdr", e.target.checked);
    });
    if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
  });
})();
"""

__all__ = ["CSS", "SCRIPT"]
