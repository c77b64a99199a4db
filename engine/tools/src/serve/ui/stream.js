// The live stream page (/ui/threads/{id}/stream): the thread's stream as Server-Sent Events
// (GET /api/threads/{id}/stream): chunks appended as they come, a gap marked, each node's
// result (durable) listed, the end shown. With ?signal=NAME, Approve and Reject send the
// signal NAME with true or false (a control: the token is needed).
"use strict";

(() => {
  const { el } = cairn;
  const $ = (id) => document.getElementById(id);
  const thread = decodeURIComponent(location.pathname.split("/")[3] || "");
  const signal = new URLSearchParams(location.search).get("signal");
  $("thread").textContent = thread;
  let chunks = 0;
  const source = new EventSource(`/api/threads/${encodeURIComponent(thread)}/stream`);
  const data = (e) => JSON.parse(e.data);

  source.addEventListener("open", () => cairn.setLive(true, "live"));
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) cairn.setLive(false, "reconnecting");
  });
  source.addEventListener("chunk", (e) => {
    const c = data(e);
    const text = typeof c.value === "string" ? c.value : JSON.stringify(c.value);
    $("tokens").append(el("span", { class: "chunk", "data-node": c.node }, text));
    chunks += 1;
    document.body.dataset.chunks = String(chunks);
  });
  source.addEventListener("gap", (e) => {
    $("tokens").append(el("span", { class: "gap muted" }, ` [${data(e).missed} missed] `));
  });
  source.addEventListener("closed", (e) => {
    const c = data(e);
    const what = c.error ? el("span", { class: "error" }, c.error) : cairn.foldedJson(c.update);
    $("closes").append(el("li", { "data-node": c.node }, el("span", { class: "mono" }, `${c.node} · step ${c.step}`), what));
  });
  source.addEventListener("ended", (e) => {
    const end = data(e);
    source.close();
    $("status").replaceChildren(cairn.badge(end.status));
    if (end.output !== null && end.output !== undefined) $("output").replaceChildren(el("h2", {}, "Output"), cairn.foldedJson(end.output));
    $("decision").hidden = true;
    cairn.setLive(false, "ended");
    document.body.dataset.ended = end.status;
  });

  if (signal) {
    $("decision").hidden = false;
    const may = cairn.tokenField("Approve and Reject");
    const send = (value) => async () => {
      const out = $("decision-out");
      if (!may(out)) return;
      try {
        await cairn.control(thread, "signal", { name: signal, value });
        out.textContent = `sent ${signal} = ${value}`;
        document.body.dataset.sent = String(value);
      } catch (err) {
        out.textContent = cairn.failure(err);
      }
    };
    $("approve").addEventListener("click", send(true));
    $("reject").addEventListener("click", send(false));
  }
})();
