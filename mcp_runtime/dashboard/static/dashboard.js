// mcp-runtime dashboard: live updates of the page over server-sent events, and times kept
// current. Plain JavaScript, vendored with the package (no framework, no build step, no network
// beyond this origin).
//
// A page with data-live-url on <main> opens that event stream:
// - "status" (run page): repaint the run badge and each DAG node (colour class, status text,
//   retries) at once, then refresh the page's other live sections;
// - "runs" (runs list): refresh the list section;
// - "ended" / "failed": stop (signed out, or the run is not readable any more).
// A live section (data-live-section) is replaced only when the server's HTML for it changed,
// and never while it holds the keyboard focus (a half-typed answer is not pulled away).
// Times: a <time class="ago"> reads "3 min ago" and a <span class="elapsed" data-since>
// "3 min"; both are kept current every 15 s (the same wording as the server's).
(() => {
  "use strict";
  function durationText(seconds) {
    seconds = Math.max(seconds, 0);
    if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
    if (seconds < 10) return `${seconds.toFixed(1)} s`;
    const whole = Math.floor(seconds);
    const two = (big, bigUnit, small, smallUnit) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
    if (whole < 60) return `${whole} s`;
    if (whole < 3600) return two(Math.floor(whole / 60), "min", whole % 60, "s");
    if (whole < 86400) return two(Math.floor(whole / 3600), "h", Math.floor((whole % 3600) / 60), "min");
    return two(Math.floor(whole / 86400), "d", Math.floor((whole % 86400) / 3600), "h");
  }
  function coarse(seconds) {
    const whole = Math.floor(seconds);
    if (whole < 60) return `${whole} s`;
    if (whole < 3600) return `${Math.floor(whole / 60)} min`;
    if (whole < 86400) return `${Math.floor(whole / 3600)} h`;
    return `${Math.floor(whole / 86400)} d`;
  }
  function relativeText(seconds) {
    if (Math.abs(seconds) < 5) return "just now";
    return seconds < 0 ? `in ${coarse(-seconds)}` : `${coarse(seconds)} ago`;
  }
  function tick() {
    const now = Date.now();
    for (const element of document.querySelectorAll("time.ago[datetime]")) {
      element.textContent = relativeText((now - Date.parse(element.getAttribute("datetime"))) / 1000);
    }
    for (const element of document.querySelectorAll(".elapsed[data-since]")) {
      element.textContent = durationText((now - Date.parse(element.dataset.since)) / 1000);
    }
  }
  window.setInterval(tick, 15000);
})();

(() => {
  "use strict";
  const main = document.getElementById("main");
  const liveUrl = main && main.dataset.liveUrl;
  if (!liveUrl || !window.EventSource) return;
  const announcer = document.getElementById("live-announcer");
  const received = new Map();
  for (const section of document.querySelectorAll("[data-live-section]")) {
    received.set(section.id, section.innerHTML);
  }

  function setTone(element, toneClass) {
    for (const name of [...element.classList]) {
      if (name.startsWith("tone-")) element.classList.remove(name);
    }
    element.classList.add(toneClass);
  }

  function paintRun(state) {
    const badge = document.getElementById("run-status");
    if (badge) {
      setTone(badge, state.status_class);
      badge.textContent = state.status_text;
      badge.dataset.status = state.status;
    }
    for (const step of state.steps) {
      const node = document.querySelector(`svg.dag g.step[data-step="${CSS.escape(step.name)}"]`);
      if (!node) continue;
      setTone(node, step.css_class);
      node.dataset.status = step.status;
      node.querySelector(".step-status").textContent = step.text;
      node.querySelector(".step-retries").textContent = step.retry_count ? `retries ${step.retry_count}` : "";
      const title = node.querySelector("title");
      title.textContent = title.textContent.replace(/: [^:]*$/, `: ${step.label}`);
    }
  }

  function holdsFocus(section) {
    const focused = document.activeElement;
    return focused && focused !== document.body && section.contains(focused);
  }

  let refreshing = null;
  let again = false;
  async function refreshOnce() {
    const response = await fetch(window.location.href, {
      headers: { "X-Dashboard-Refresh": "1" },
      credentials: "same-origin",
    });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const section of document.querySelectorAll("[data-live-section]")) {
      const next = fresh.getElementById(section.id);
      if (!next || next.innerHTML === received.get(section.id) || holdsFocus(section)) continue;
      received.set(section.id, next.innerHTML);
      section.replaceWith(document.importNode(next, true));
    }
  }
  function refreshSections() {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = (async () => {
      do {
        again = false;
        await refreshOnce();
      } while (again);
    })()
      .catch(() => {})
      .finally(() => {
        refreshing = null;
      });
  }

  let lastStatus = null;
  const source = new EventSource(liveUrl);
  source.addEventListener("status", (event) => {
    const state = JSON.parse(event.data);
    paintRun(state);
    if (announcer && lastStatus !== null && state.status_text !== lastStatus) {
      announcer.textContent = `Run is now ${state.status_text}`;
    }
    lastStatus = state.status_text;
    refreshSections();
    if (state.done) source.close();
  });
  source.addEventListener("runs", refreshSections);
  source.addEventListener("ended", () => source.close());
  source.addEventListener("failed", (event) => {
    source.close();
    if (announcer) announcer.textContent = event.data;
  });
})();
