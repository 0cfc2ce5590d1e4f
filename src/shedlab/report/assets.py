"""The report's stylesheet and its two small scripts (inlined into every report).

* :data:`ERROR_COLLECTOR` runs first, in ``<head>``: it records every JavaScript error (``error``,
  ``unhandledrejection``, ``console.error``) into ``<pre id="js-errors" data-count="N">``, so a
  headless browser's DOM dump shows them.
* :data:`LOADER` runs last: it draws the figures stored as JSON in ``<script class="figure-data">``
  one after the other with ``Plotly.newPlot`` and writes what it drew into ``<pre id="render-status">``
  as JSON (``expected``, ``drawn``, ``failed``, ``done``).
"""

from __future__ import annotations

__all__ = ["CSS", "ERROR_COLLECTOR", "LOADER"]

CSS = """
:root { --fg:#212529; --muted:#6c757d; --line:#dee2e6; --bg:#ffffff; --soft:#f8f9fa;
  --accent:#0b5cad; --good:#d3f0dc; --good-fg:#11632f; --normal:#fff1c2; --normal-fg:#7a5b00;
  --bad:#fbd5d5; --bad-fg:#9b1c1c; }
* { box-sizing: border-box; }
html { scroll-behavior: smooth; }
body { margin:0; color:var(--fg); background:var(--bg);
  font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; }
a { color:var(--accent); text-decoration:none; } a:hover { text-decoration:underline; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono",
  monospace; font-size: 0.86em; }
header.top { background:#102a43; color:#f0f4f8; padding:28px 40px 22px; }
header.top h1 { margin:0 0 6px; font-size:26px; font-weight:650; letter-spacing:-0.01em; }
header.top .sub { color:#bcccdc; font-size:14px; }
header.top .sub code { color:#f0f4f8; }
.layout { display:grid; grid-template-columns: 230px minmax(0,1fr); gap:36px; max-width:1500px;
  margin:0 auto; padding: 24px 32px 60px; }
nav.toc { position:sticky; top:16px; align-self:start; font-size:13.5px; max-height:calc(100vh - 32px);
  overflow:auto; border-right:1px solid var(--line); padding-right:16px; }
nav.toc h2 { font-size:12px; text-transform:uppercase; letter-spacing:0.08em; color:var(--muted);
  margin:4px 0 8px; border:0; }
nav.toc ol { list-style:none; padding:0; margin:0; }
nav.toc li { margin:3px 0; } nav.toc li li { margin-left:14px; font-size:13px; }
nav.toc a { color:var(--fg); } nav.toc a:hover { color:var(--accent); }
main { min-width:0; }
section { margin: 0 0 44px; }
h2 { font-size:21px; margin: 8px 0 12px; padding-bottom:6px; border-bottom:2px solid var(--line); }
h3 { font-size:17px; margin: 30px 0 8px; }
p.lead { font-size:15.5px; color:#343a40; max-width: 80ch; }
p.small { font-size:13px; margin:6px 0 2px; }
.muted { color:var(--muted); }
.intro { background:var(--soft); border:1px solid var(--line); border-radius:8px; padding:6px 20px; }
.intro ul { margin:6px 0; padding-left:20px; } .intro li { margin:5px 0; }
table { border-collapse:collapse; }
.scroll { overflow-x:auto; }
table.pip { width:100%; margin: 8px 0 6px; font-size:13.5px; }
table.pip th, table.pip td { border:1px solid var(--line); padding:8px 10px; vertical-align:top; }
table.pip thead th { background:var(--soft); font-weight:600; text-align:left; }
table.pip thead th a { color:var(--fg); border-bottom:1px dotted var(--muted); }
table.pip tbody th { text-align:left; font-weight:600; min-width:150px; }
.swatch { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:7px; }
td.rating-good { background:var(--good); } td.rating-normal { background:var(--normal); }
td.rating-bad { background:var(--bad); } td.rating-none { background:#fff; }
span.verdict { padding:0 .3em; } span.verdict-good { background:var(--good); }
span.verdict-normal { background:var(--normal); } span.verdict-bad { background:var(--bad); }
.cell .fig { font-size:16px; font-weight:650; font-variant-numeric: tabular-nums; }
.cell .ci { font-size:12px; color:#495057; font-variant-numeric: tabular-nums; }
.cell a.def { font-size:11.5px; display:block; margin-top:2px; }
.unit { font-weight:400; font-size:12px; color:var(--muted); }
.badge { display:inline-block; font-size:11px; font-weight:700; text-transform:uppercase;
  letter-spacing:0.05em; padding:1px 7px; border-radius:10px; margin-top:3px; background:#fff; }
.badge.good { color:var(--good-fg); border:1px solid var(--good-fg); }
.badge.normal { color:var(--normal-fg); border:1px solid var(--normal-fg); }
.badge.bad { color:var(--bad-fg); border:1px solid var(--bad-fg); }
.badge.warn { color:#8a5a00; border:1px dashed #8a5a00; text-transform:none; }
.claim { font-size:11.5px; color:#495057; margin-top:2px; }
table.data { font-size:13px; margin:8px 0; }
table.data th, table.data td { border-bottom:1px solid var(--line); padding:5px 10px; text-align:right;
  font-variant-numeric: tabular-nums; vertical-align:top; }
table.data td.text, table.data th.text { text-align:left; }
table.data thead th { background:var(--soft); }
table.data .ci { font-size:11px; color:var(--muted); white-space:nowrap; }
dl.defs dt { font-weight:650; margin-top:18px; font-size:16px; }
dl.defs dd { margin:4px 0 0 0; max-width:85ch; }
dl.defs dd .rule { font-size:13px; color:#343a40; }
dl.meta { display:grid; grid-template-columns: max-content 1fr; gap:4px 18px; font-size:14px; }
dl.meta dt { color:var(--muted); } dl.meta dd { margin:0; overflow-wrap:anywhere; }
.figure { border:1px solid var(--line); border-radius:8px; padding:8px 6px 4px; margin: 10px 0 18px;
  background:#fff; }
.figure .caption { font-size:13px; color:#495057; padding: 2px 10px 6px; }
.plot { width:100%; }
details { margin: 8px 0; } details summary { cursor:pointer; color:var(--accent); }
details pre { background:var(--soft); border:1px solid var(--line); border-radius:6px; padding:10px;
  overflow:auto; max-height: 420px; }
.note { border-left:4px solid #f0b429; background:#fffbea; padding:8px 14px; margin:10px 0;
  font-size:14px; }
table.events td { padding:2px 12px 2px 0; vertical-align:top; font-size:13px; }
footer { color:var(--muted); font-size:12.5px; border-top:1px solid var(--line); padding-top:12px; }
#js-errors, #render-status { display:none; }
@media (max-width: 900px) { .layout { grid-template-columns: 1fr; }
  nav.toc { position:static; border:0; } }
@media print { nav.toc { display:none; } .layout { grid-template-columns: 1fr; } }
"""

ERROR_COLLECTOR = """
(function () {
  var errors = [];
  function flush() {
    var el = document.getElementById('js-errors');
    if (el) {
      el.textContent = errors.join('\\n');
      el.setAttribute('data-count', String(errors.length));
    }
  }
  function record(message) { errors.push(String(message)); flush(); }
  window.__shedlabRecordError = record;
  window.addEventListener('error', function (e) {
    var where = e.filename ? ' at ' + e.filename + ':' + e.lineno : '';
    record('error: ' + (e.message || e.type) + where);
  });
  window.addEventListener('unhandledrejection', function (e) {
    record('unhandledrejection: ' + e.reason);
  });
  var original = console.error;
  console.error = function () {
    record('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    if (original) { original.apply(console, arguments); }
  };
  document.addEventListener('DOMContentLoaded', flush);
})();
"""

LOADER = """
(function () {
  var status = document.getElementById('render-status');
  var blocks = Array.prototype.slice.call(document.querySelectorAll('script.figure-data'));
  var drawn = 0, failed = [];
  function report(done) {
    status.textContent = JSON.stringify(
      {expected: blocks.length, drawn: drawn, failed: failed, done: done});
    status.setAttribute('data-done', done ? 'true' : 'false');
  }
  report(false);
  if (typeof Plotly === 'undefined') {
    window.__shedlabRecordError('plotly.js did not load');
    report(true);
    return;
  }
  var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ['lasso2d', 'select2d'],
    toImageButtonOptions: {format: 'png', scale: 2}};
  function fail(block, message) {
    failed.push(block.getAttribute('data-target'));
    window.__shedlabRecordError(message);
  }
  function next(i) {
    if (i >= blocks.length) { report(true); return; }
    var block = blocks[i];
    var target = document.getElementById(block.getAttribute('data-target'));
    var spec;
    try { spec = JSON.parse(block.textContent); } catch (err) {
      fail(block, 'bad figure JSON: ' + err);
      next(i + 1);
      return;
    }
    Plotly.newPlot(target, spec.data, spec.layout, config).then(function () {
      drawn += 1;
      target.setAttribute('data-rendered', 'true');
      report(false);
      window.setTimeout(function () { next(i + 1); }, 0);
    }, function (err) {
      fail(block, 'plot failed: ' + err);
      next(i + 1);
    });
  }
  next(0);
})();
"""
