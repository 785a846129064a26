// The MCP Apps (io.modelcontextprotocol/ui) side of a run view rendered by an MCP host.
// Inlined into the ui:// HTML: handshake (ui/initialize, then ui/notifications/initialized),
// size reports, and on each run.status tool result the view of the run that result links in
// its _meta.ui.resourceUri, read through the host (resources/read). Opened outside a host, it
// does nothing and the HTML is a plain, static page.
(() => {
  "use strict";
  const host = window.parent;
  if (!host || host === window) return;
  const pending = new Map();
  let nextId = 1;
  let hostCapabilities = {};
  let initialized = false;

  const send = (message) => host.postMessage({ jsonrpc: "2.0", ...message }, "*");
  const notify = (method, params) => send({ method, params });
  const request = (method, params) => {
    const id = nextId++;
    send({ id, method, params });
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  };
  const reportSize = () => {
    if (!initialized) return; // nothing but the handshake before it completes
    const root = document.documentElement;
    notify("ui/notifications/size-changed", { width: root.scrollWidth, height: root.scrollHeight });
  };

  async function showLinkedRun(result) {
    const uri = result && result._meta && result._meta.ui && result._meta.ui.resourceUri;
    if (!uri || !hostCapabilities.serverResources) return;
    const read = await request("resources/read", { uri });
    const html = read && read.contents && read.contents[0] && read.contents[0].text;
    if (!html) return;
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("run-view");
    if (fresh) document.getElementById("run-view").replaceWith(document.importNode(fresh, true));
    reportSize();
  }

  window.addEventListener("message", (event) => {
    if (event.source !== host || !event.data || event.data.jsonrpc !== "2.0") return;
    const message = event.data;
    if (message.method === undefined && pending.has(message.id)) {
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) waiter.reject(message.error);
      else waiter.resolve(message.result);
    } else if (message.method === "ui/notifications/tool-result") {
      showLinkedRun(message.params).catch(() => {});
    } else if (message.method === "ui/resource-teardown") {
      send({ id: message.id, result: {} });
    } else if (message.method === "ping") {
      send({ id: message.id, result: {} });
    }
  });

  request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "mcp-runtime run view", version: "0.1.0" },
    appCapabilities: { availableDisplayModes: ["inline"] },
  })
    .then((result) => {
      hostCapabilities = (result && result.hostCapabilities) || {};
      notify("ui/notifications/initialized", {});
      initialized = true;
      reportSize();
    })
    .catch(() => {});
  if (window.ResizeObserver) new ResizeObserver(reportSize).observe(document.body);
})();
