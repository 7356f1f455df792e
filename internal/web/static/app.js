// pier's web view works without this script. With it, the page polls its
// own live part once a second (a 304 when nothing changed), swaps in what
// changed, refreshes ages, submits filters on change and copies
// haproxy.conf. The server renders every byte of HTML; this script only
// moves already-escaped markup around and never builds markup from data.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!live) { return; }
  var etag = live.getAttribute("data-etag") || "";
  var period = 1000;

  function age(seconds) { // the rules of web.Age
    if (seconds < 0) { return "0s"; }
    if (seconds < 120) { return Math.floor(seconds) + "s"; }
    if (seconds < 7200) { return Math.floor(seconds / 60) + "m"; }
    if (seconds < 172800) { return Math.floor(seconds / 3600) + "h"; }
    return Math.floor(seconds / 86400) + "d";
  }
  function refreshAges() {
    var now = Date.now();
    document.querySelectorAll("time[data-t]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-t"));
      if (!isNaN(t)) { el.textContent = age((now - t) / 1000); }
    });
  }

  // swap replaces the parts marked data-swap (the overview's table body
  // and counters: the filter form keeps its focus); a page without such
  // parts is replaced whole, keeping which <details> were open.
  function swap(html) {
    var next = document.createElement("template");
    next.innerHTML = html; // inert: nothing in a template runs or loads
    var parts = live.querySelectorAll("[data-swap]");
    if (parts.length) {
      parts.forEach(function (el) {
        var repl = el.id && next.content.getElementById(el.id);
        if (repl) { el.replaceWith(document.importNode(repl, true)); }
      });
      return;
    }
    var open = Array.prototype.map.call(live.querySelectorAll("details"), function (d) { return d.open; });
    live.replaceChildren(document.importNode(next.content, true));
    live.querySelectorAll("details").forEach(function (d, i) { if (i < open.length) { d.open = open[i]; } });
  }

  function show(text, bad) {
    if (!status) { return; }
    status.textContent = text;
    status.className = bad ? "bad" : "muted";
  }

  function poll() {
    if (document.hidden) { setTimeout(poll, period); return; }
    fetch(location.href, { headers: { "X-Pier-Part": "live", "If-None-Match": etag }, cache: "no-store" })
      .then(function (resp) {
        if (resp.status === 304) { return null; }
        if (!resp.ok) { throw new Error(resp.status + " " + resp.statusText); }
        etag = resp.headers.get("ETag") || "";
        return resp.text();
      })
      .then(function (html) {
        if (html !== null) { swap(html); live.setAttribute("data-etag", etag); }
        refreshAges();
        show("live · " + new Date().toLocaleTimeString(), false);
      })
      .catch(function (err) { show("not updating: " + err.message, true); })
      .then(function () { setTimeout(poll, period); });
  }
  setTimeout(poll, period);

  document.addEventListener("change", function (ev) {
    var form = ev.target.form;
    if (form && form.id === "filters") { form.submit(); }
  });
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-copy]");
    if (!btn) { return; }
    var src = document.getElementById(btn.getAttribute("data-copy"));
    if (!src) { return; }
    var done = function () { btn.textContent = "Copied"; setTimeout(function () { btn.textContent = "Copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(src.textContent).then(done, function () { btn.textContent = "Copy failed"; });
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(src);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    if (document.execCommand("copy")) { done(); }
  });
})();
