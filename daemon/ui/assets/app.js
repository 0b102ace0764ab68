// continuityd's page: keyboard steps, confirmations, and the live stream
// that fetches the current view again when its place changes (no
// polling, no reload). Served from the daemon; no inline script.
"use strict";
(function () {
  var main = function () { return document.getElementById("main"); };

  // Timeline: up/down (or j/k) step between snapshots, Enter opens one.
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#snapshots tr.snap")); }
  var sel = -1;
  function select(i) {
    var r = rows();
    if (!r.length) { return; }
    sel = Math.max(0, Math.min(i, r.length - 1));
    r.forEach(function (x, j) { x.classList.toggle("sel", j === sel); });
    r[sel].tabIndex = -1;
    r[sel].focus();
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) { return; }
    if (e.altKey || e.ctrlKey || e.metaKey) { return; }
    var link;
    if (rows().length) {
      if (e.key === "ArrowDown" || e.key === "j") { select(sel + 1); e.preventDefault(); return; }
      if (e.key === "ArrowUp" || e.key === "k") { select(sel - 1); e.preventDefault(); return; }
      if (e.key === "Enter" && sel >= 0) {
        link = rows()[sel].querySelector("a");
        if (link) { link.click(); }
        return;
      }
    }
    // Changes: left/right step to the older/newer snapshot.
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      link = document.querySelector('.steps a[rel="' + (e.key === "ArrowLeft" ? "prev" : "next") + '"]');
      if (link) { link.click(); e.preventDefault(); }
    }
  });

  // A form that asks first.
  document.addEventListener("submit", function (e) {
    var q = e.target.getAttribute("data-confirm");
    if (q && !window.confirm(q)) { e.preventDefault(); }
  });

  // The live stream: when a place the view shows has events, fetch the
  // view again and put its main part in place.
  var agent = document.body.getAttribute("data-agent") || "";
  if (!window.EventSource || document.querySelector("form.confirm")) { return; }
  var live = document.getElementById("live");
  var es = new EventSource("/ui/events" + (agent ? "?agent=" + encodeURIComponent(agent) : ""));
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("main");
        if (next) { main().replaceWith(next); sel = -1; }
      }
    }).finally(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }
  es.onopen = function () { live.classList.add("on"); };
  es.onerror = function () { live.classList.remove("on"); };
  es.addEventListener("change", refresh);
})();
