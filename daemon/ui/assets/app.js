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

  // A long diff: the view carries its first lines; the rest of each file
  // is fetched at once (one request per file, while the browser paints
  // the first lines) and kept as blocks
  // of lines, each as tall as its lines (the scroll bar is right at
  // once), built into the page as it comes near the view, and the others
  // while the browser is idle (so its find sees every line in the end).
  // When every file's rest is in the page, the body says so
  // (data-diff="shown", data-diff-at: ms after the navigation began).
  function shown() {
    document.body.setAttribute("data-diff-at", String(performance.now()));
    document.body.setAttribute("data-diff", "shown");
  }
  var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 1); };
  function loadRest() {
    var rest = Array.prototype.slice.call(document.querySelectorAll("pre.diff .rest[data-src]"));
    if (!rest.length) { shown(); return; }
    var line = document.querySelector("pre.diff span");
    var h = line ? line.getBoundingClientRect().height : 16;
    rest.forEach(function (el) { el.style.minHeight = (+el.getAttribute("data-lines") * h) + "px"; });
    var html = new WeakMap(), later = [];
    function fill(div) {
      var b = html.get(div);
      if (b === undefined) { return; }
      html.delete(div);
      if (io) { io.unobserve(div); }
      div.innerHTML = b;
      div.style.minHeight = "";
    }
    var io = window.IntersectionObserver ? new IntersectionObserver(function (seen) {
      seen.forEach(function (e) { if (e.isIntersecting) { fill(e.target); } });
    }, { rootMargin: "1500px 0px" }) : null;
    function place(el, ans) {
      var frag = document.createDocumentFragment();
      ans.chunks.forEach(function (b, k) {
        var div = document.createElement("div"), n = Math.min(ans.chunkLines, ans.lines - k * ans.chunkLines);
        div.className = "chunk";
        div.setAttribute("data-lines", String(n));
        div.style.minHeight = (n * h) + "px";
        html.set(div, b);
        frag.appendChild(div);
        if (io) { io.observe(div); }
      });
      el.replaceWith(frag);
    }
    function fillIdle() {
      var div = later.shift();
      if (!div) { document.body.setAttribute("data-diff-all-at", String(performance.now())); return; }
      fill(div);
      idle(fillIdle);
    }
    // Every file's rest is asked for at once, while the browser paints
    // the first lines; each is put in place as it comes.
    var left = rest.length;
    rest.forEach(function (el) {
      fetch(el.getAttribute("data-src"), { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      }).then(function (ans) { place(el, ans); }).catch(function (err) {
        el.textContent = "the rest of this file's diff could not be loaded: " + err.message + "; reload the page";
        el.className = "bad";
      }).finally(function () {
        if (--left) { return; }
        later = Array.prototype.filter.call(document.querySelectorAll("pre.diff div.chunk"), function (d) { return html.has(d); });
        shown();
        idle(fillIdle);
      });
    });
  }
  loadRest();

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
        if (next) { main().replaceWith(next); sel = -1; loadRest(); }
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
