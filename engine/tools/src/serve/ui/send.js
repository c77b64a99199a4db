// Cairn web view: a form that sends something named, with a JSON value, to a running thread
// (with the tab's token): a signal (`POST /api/threads/{id}/signal`), an update (`POST
// /api/threads/{id}/updates/{name}`), a promise's completion (`POST /api/promises/{id}`). The value is
// checked as JSON as it is typed and nothing is sent until it parses; the form shows the
// endpoint's answer, or its refusal (an unknown thread, a finished one, a name or value the
// workflow refuses) with the field it names.
"use strict";

const cairnSend = (() => {
  const { el } = cairn;

  /** A send form. `spec`:
   *  - `kind`: its name (`data-send` on the form: "signal", "update");
   *  - `title`, `button`: its heading and its button's text;
   *  - `fields`: extra text fields besides the value, each `{ name, placeholder, required?,
   *    list? }` (`list`: the id of a `<datalist>` of suggested texts);
   *  - `value`: the value's label; `valueName`: the body field it is (default "value": a 400
   *    naming it marks the value); `initial`: its first text (default `null`);
   *  - `valueUnused(fields)`: true when the value is not sent (then it need not parse);
   *  - `path(fields)`: the route to POST to; `body(fields, value)`: the JSON body
   *    (`fields`: the extra fields' trimmed texts by name, "" when empty);
   *  - `answer(reply)`: the text shown for the endpoint's answer;
   *  - `hasToken(out)`: the token check (`cairn.tokenField`); `sent(reply)`: after a send. */
  function form(spec) {
    const inputs = spec.fields.map((f) => el("input", {
      name: f.name, "aria-label": f.placeholder, placeholder: f.placeholder, autocomplete: "off",
      ...(f.list ? { list: f.list } : {}),
    }));
    const valueName = spec.valueName || "value";
    const value = el("textarea", {
      class: "mono", name: valueName, rows: 3, spellcheck: "false", "aria-label": spec.value,
    }, spec.initial ?? "null");
    const note = el("div", { class: "note" });
    const go = el("button", { class: "b primary", type: "submit" }, spec.button);
    const result = el("div", { class: "send-result", role: "status" });
    const out = el("form", { class: "send", "data-send": spec.kind, novalidate: true },
      el("h3", {}, spec.title),
      el("div", { class: "row" }, inputs),
      el("label", {}, spec.value), value, note,
      el("div", { class: "row" }, go, result));

    const texts = () => Object.fromEntries(inputs.map((i) => [i.name, i.value.trim()]));
    // Fields are marked red only once the form was typed into or sent: an untouched form says
    // what it needs, quietly.
    let touched = false;

    /** The body, or null with the reason shown under the value. */
    function body() {
      const fields = texts();
      let missing = null;
      for (const [i, f] of spec.fields.entries()) {
        const empty = f.required && !fields[f.name];
        inputs[i].classList.toggle("invalid", Boolean(empty) && touched);
        if (empty && !missing) missing = f.placeholder;
      }
      let parsed = null;
      const unused = spec.valueUnused && spec.valueUnused(fields);
      try {
        if (!unused) parsed = JSON.parse(value.value);
        value.classList.remove("invalid");
        value.classList.toggle("unused", Boolean(unused));
      } catch (e) {
        value.classList.add("invalid");
        note.className = "note error";
        note.textContent = value.value.trim() ? `not JSON: ${e.message}` : "the value is required (JSON, e.g. null)";
        return null;
      }
      if (missing) {
        note.className = touched ? "note error" : "note muted";
        note.textContent = `${missing} is required`;
        return null;
      }
      note.className = "note ok";
      note.textContent = unused ? "the value is not sent" : "valid JSON";
      return { path: spec.path(fields), body: spec.body(fields, parsed) };
    }
    const check = () => { go.disabled = body() === null; };
    for (const f of [value, ...inputs]) f.addEventListener("input", () => { touched = true; check(); });
    check();

    out.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      touched = true;
      const req = body();
      if (!req || !spec.hasToken(result)) return;
      go.disabled = true;
      result.className = "send-result muted";
      result.textContent = "sending…";
      try {
        const reply = await cairn.send("POST", req.path, req.body);
        result.className = "send-result ok";
        result.textContent = spec.answer(reply);
        check();
        spec.sent(reply);
      } catch (e) {
        check();
        result.className = "send-result error";
        result.textContent = cairn.failure(e);
        // A 400 names the field it refuses (a 404 naming the update's name marks it too); a
        // 409 or another 404 is the thread's, not a field's.
        const field = (e.status === 400 || e.status === 404) && /\(([\w.]+)\)$/.exec(e.message);
        const named = field && inputs.find((i) => i.name === field[1].split(".")[0]);
        if (named) named.classList.add("invalid");
        else if (field && field[1].startsWith(valueName)) value.classList.add("invalid");
      }
    });
    return out;
  }

  /** The signal form of thread `id`: a name, a JSON value and an optional dedup key (a key
   *  sent before answers the first signal's number and stores nothing). */
  function signal(id, hasToken, sent) {
    return form({
      kind: "signal",
      title: "Send a signal",
      button: "Signal",
      fields: [
        { name: "name", placeholder: "signal name", required: true },
        { name: "dedup_key", placeholder: "dedup key (optional)" },
      ],
      value: "value (JSON)",
      path: () => `/api/threads/${encodeURIComponent(id)}/signal`,
      body: (f, value) => (f.dedup_key ? { name: f.name, value, dedup_key: f.dedup_key } : { name: f.name, value }),
      answer: (r) => `signal #${r.signal} ${r.duplicate ? "was sent before (this key): nothing stored" : "stored"}; the thread is ${r.status.replace("_", " ")}`,
      hasToken,
      sent,
    });
  }

  /** The update form of thread `id`: the update's name (suggested from `names`, the datalist
   *  `update-names` the page fills with the declared ones), its JSON arguments, an optional
   *  update id (an id applied before answers its recorded reply and applies nothing) and an
   *  optional wait (`wait_ms`: past it, a thread whose runner has not reached a step boundary
   *  answers 504; send the same id again). */
  function update(id, hasToken, sent) {
    return form({
      kind: "update",
      title: "Apply an update",
      button: "Update",
      fields: [
        { name: "name", placeholder: "update name", required: true, list: "update-names" },
        { name: "id", placeholder: "update id (optional)" },
        { name: "wait_ms", placeholder: "wait ms (optional)" },
      ],
      value: "arguments (JSON)",
      valueName: "args",
      path: (f) => `/api/threads/${encodeURIComponent(id)}/updates/${encodeURIComponent(f.name)}` +
        (f.wait_ms ? `?wait_ms=${encodeURIComponent(f.wait_ms)}` : ""),
      body: (f, args) => (f.id ? { args, id: f.id } : { args }),
      answer: (r) => (r.duplicate
        ? `update ${r.id} was applied before: its reply ${JSON.stringify(r.reply)} (seq ${r.seq}); nothing applied again`
        : `update ${r.id} applied (seq ${r.seq}); reply: ${JSON.stringify(r.reply)}`),
      hasToken,
      sent,
    });
  }

  /** The form that completes a promise (`POST /api/promises/{id}`): its id (suggested from the
   *  datalist `open-promises`), a JSON value, or an error message instead. The same completion
   *  again answers the duplicate; another one the endpoint's 409. */
  function promise(hasToken, sent) {
    return form({
      kind: "promise",
      title: "Complete a promise",
      button: "Complete",
      fields: [
        { name: "promise", placeholder: "promise id", required: true, list: "open-promises" },
        { name: "error", placeholder: "error message (instead of a value)" },
      ],
      value: "value (JSON; not sent with an error message)",
      valueUnused: (f) => Boolean(f.error),
      path: (f) => `/api/promises/${encodeURIComponent(f.promise)}`,
      body: (f, value) => (f.error ? { error: f.error } : { value }),
      answer: (r) => `promise ${r.promise} ${r.duplicate ? "was completed so before: nothing stored" : "completed"} (signal #${r.signal})`,
      hasToken,
      sent,
    });
  }

  return { form, signal, update, promise };
})();
