// Cairn web view: the form that starts a thread of a workflow (POST
// /api/workflows/{id}/threads, with the tab's token): its input as JSON, checked as it is typed
// and pretty-printed on demand, an optional thread id and labels, a queue (key, priority), the
// version when several are compiled in; it shows the new thread's link, or the endpoint's
// refusal by its field. With an update named (update-with-start: POST
// /api/threads/{id}/updates/{name} with `start`), it starts the thread of that id if absent and
// applies the update to it, and shows the update's reply beside the link.
"use strict";

const cairnStart = (() => {
  const { el } = cairn;

  /** "k=v, k2=v2" (commas or new lines) as an object, or an Error naming the bad pair. */
  function parseLabels(raw) {
    const out = {};
    for (const pair of raw.split(/[,\n]/).map((p) => p.trim()).filter(Boolean)) {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`label "${pair}" is not key=value`);
      out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
    }
    return out;
  }

  /** The start form of workflow `w`: input (JSON, checked as it is typed), optional id and
   *  labels, a queue with its key and priority, and the version when several are compiled in.
   *  `hasToken(out)` checks the tab's token; `started(answer)` follows a start. */
  function form(w, hasToken, started) {
    const wf = w.workflow;
    const input = el("textarea", { class: "mono", name: "input", rows: 6, spellcheck: "false", "aria-label": `input of ${wf}` }, "{}");
    const inputNote = el("div", { class: "note" });
    const id = el("input", { name: "id", "aria-label": "thread id", placeholder: "thread id (optional: a new one is made)", autocomplete: "off" });
    const labels = el("input", { name: "labels", "aria-label": "labels", placeholder: "labels: team=a, env=test (optional)", autocomplete: "off" });
    const newest = w.versions[w.versions.length - 1];
    const version = w.versions.length > 1
      ? el("select", { name: "version", "aria-label": "version" }, w.versions.slice().reverse().map((v) => el("option", { value: String(v) }, `v${v}${v === newest ? " (newest)" : ""}`)))
      : null;
    const queue = el("input", { name: "queue", "aria-label": "queue", placeholder: "queue (optional)", autocomplete: "off" });
    const key = el("input", { name: "key", "aria-label": "queue key", placeholder: "key (a tenant)", autocomplete: "off" });
    const priority = el("input", { name: "priority", "aria-label": "priority", type: "number", min: 0, max: 255, placeholder: "priority" });
    const upName = el("input", { name: "update", "aria-label": "update name", placeholder: "update name", autocomplete: "off" });
    const upId = el("input", { name: "update_id", "aria-label": "update id", placeholder: "update id (optional)", autocomplete: "off" });
    const upArgs = el("textarea", { class: "mono", name: "args", rows: 2, spellcheck: "false", "aria-label": "update arguments" }, "null");
    const go = el("button", { class: "b primary", type: "submit" }, "Start");
    const format = el("button", { class: "b", type: "button", title: "pretty-print the input" }, "Format");
    const result = el("div", { class: "start-result", role: "status" });
    const form = el("form", { class: "start", "data-start": wf, novalidate: true },
      el("h3", {}, "Start a thread"),
      el("label", {}, "input (JSON: the workflow's initial state)"), input, inputNote,
      el("div", { class: "row" }, id, version),
      labels,
      el("details", { class: "more" }, el("summary", {}, "on a queue"),
        el("div", { class: "row" }, queue, key, priority)),
      el("details", { class: "more", "data-with": "update" },
        el("summary", {}, "with an update (start if absent, then update)"),
        el("div", { class: "row" }, upName, upId),
        el("label", {}, "update arguments (JSON)"), upArgs),
      el("div", { class: "row" }, go, format, result));

    /** The body, or null with the reason shown by its field. */
    function body() {
      const b = {};
      try {
        b.input = JSON.parse(input.value);
        input.classList.remove("invalid");
        inputNote.className = "note ok";
        inputNote.textContent = "valid JSON";
      } catch (e) {
        input.classList.add("invalid");
        inputNote.className = "note error";
        inputNote.textContent = input.value.trim() ? `not JSON: ${e.message}` : "the input is required (JSON, e.g. {})";
        return null;
      }
      try {
        b.labels = parseLabels(labels.value);
        labels.classList.remove("invalid");
      } catch (e) {
        labels.classList.add("invalid");
        inputNote.className = "note error";
        inputNote.textContent = e.message;
        return null;
      }
      if (queue.value.trim()) {
        b.queue = queue.value.trim();
        if (key.value.trim()) b.key = key.value.trim();
        if (priority.value !== "") b.priority = Number(priority.value);
      }
      const lonely = !b.queue && (key.value.trim() || priority.value !== "");
      const badPriority = priority.value !== "" && !(Number.isInteger(Number(priority.value)) && Number(priority.value) >= 0 && Number(priority.value) <= 255);
      queue.classList.toggle("invalid", Boolean(lonely));
      priority.classList.toggle("invalid", badPriority);
      if (lonely || badPriority) {
        inputNote.className = "note error";
        inputNote.textContent = lonely ? "a key or a priority needs a queue" : "the priority is a whole number from 0 to 255";
        return null;
      }
      if (id.value.trim()) b.id = id.value.trim();
      if (version) b.version = Number(version.value);
      return withUpdate(b);
    }

    /** `b` as it is with no update named; with one, the update-with-start it makes (`{update:
     *  {path, body}}`), or null with the reason shown (it needs the thread's id and JSON
     *  arguments, and takes no queue). */
    function withUpdate(b) {
      const name = upName.value.trim();
      upArgs.classList.remove("invalid");
      id.classList.remove("invalid");
      if (!name) {
        go.textContent = "Start";
        return b;
      }
      go.textContent = "Start and update";
      let args;
      try {
        args = JSON.parse(upArgs.value);
      } catch (e) {
        upArgs.classList.add("invalid");
        inputNote.className = "note error";
        inputNote.textContent = `the update's arguments are not JSON: ${e.message}`;
        return null;
      }
      const why = !b.id ? "an update-with-start needs the thread's id" : b.queue ? "an update-with-start starts on no queue" : null;
      id.classList.toggle("invalid", !b.id);
      if (why) {
        inputNote.className = "note error";
        inputNote.textContent = why;
        return null;
      }
      const start = { workflow: wf, input: b.input, labels: b.labels };
      if (b.version) start.version = b.version;
      const ub = { args, start };
      if (upId.value.trim()) ub.id = upId.value.trim();
      return { update: { path: `/api/threads/${encodeURIComponent(b.id)}/updates/${encodeURIComponent(name)}`, body: ub } };
    }
    const check = () => { go.disabled = format.disabled = body() === null; };
    format.addEventListener("click", () => { input.value = JSON.stringify(JSON.parse(input.value), null, 2); check(); });
    for (const f of [input, labels, queue, key, priority, id, upName, upId, upArgs]) f.addEventListener("input", check);
    check();

    /** What the page shows for the answer `r` of a start or an update-with-start. */
    function shown(r) {
      const link = el("a", { class: "mono", href: `/ui/threads/${encodeURIComponent(r.thread)}`, "data-thread": r.thread }, r.thread);
      if (r.reply === undefined) return [r.created ? "started " : "already there: ", link];
      const applied = r.duplicate
        ? `; update ${r.id} was applied before: its reply ${JSON.stringify(r.reply)} (nothing applied again)`
        : `; update ${r.id} applied (seq ${r.seq}); reply: ${JSON.stringify(r.reply)}`;
      return [r.created ? "started " : "already there: ", link, applied];
    }

    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const b = body();
      if (!b || !hasToken(result)) return;
      go.disabled = true;
      result.className = "start-result muted";
      result.textContent = "starting…";
      try {
        const r = b.update
          ? await cairn.send("POST", b.update.path, b.update.body)
          : await cairn.send("POST", `/api/workflows/${encodeURIComponent(wf)}/threads`, b);
        result.className = "start-result";
        result.replaceChildren(...shown(r));
        started(r);
        check();
      } catch (e) {
        check();
        result.className = "start-result error";
        result.textContent = cairn.failure(e);
        if (/\((args|name)\)$/.test(e.message)) (/args\)$/.test(e.message) ? upArgs : upName).classList.add("invalid");
        if (/\(input\)$/.test(e.message)) {
          input.classList.add("invalid");
          inputNote.className = "note error";
          inputNote.textContent = `valid JSON, but not a state of ${wf}: see below`;
        }
      }
    });
    return form;
  }

  return { form };
})();
