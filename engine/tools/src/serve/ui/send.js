// Cairn web view: a form that sends something named, with a JSON value, to a running thread
// (with the tab's token): a signal (`POST /api/threads/{id}/signal`), and any call of that shape
// (an update, `POST /api/threads/{id}/updates/{name}`) by a few lines of its own. The value is
// checked as JSON as it is typed and nothing is sent until it parses; the form shows the
// endpoint's answer, or its refusal (an unknown thread, a finished one, a name or value the
// workflow refuses) with the field it names.
"use strict";

const cairnSend = (() => {
  const { el } = cairn;

  /** A send form. `spec`:
   *  - `kind`: its name (`data-send` on the form: "signal", "update");
   *  - `title`, `button`: its heading and its button's text;
   *  - `fields`: extra text fields besides the value, each `{ name, placeholder, required? }`;
   *  - `value`: the value's label; `initial`: its first text (default `null`);
   *  - `path(fields)`: the route to POST to; `body(fields, value)`: the JSON body
   *    (`fields`: the extra fields' trimmed texts by name, "" when empty);
   *  - `answer(reply)`: the text shown for the endpoint's answer;
   *  - `hasToken(out)`: the token check (`cairn.tokenField`); `sent(reply)`: after a send. */
  function form(spec) {
    const inputs = spec.fields.map((f) => el("input", {
      name: f.name, "aria-label": f.placeholder, placeholder: f.placeholder, autocomplete: "off",
    }));
    const value = el("textarea", {
      class: "mono", name: "value", rows: 3, spellcheck: "false", "aria-label": spec.value,
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

    /** The body, or null with the reason shown under the value. */
    function body() {
      const fields = texts();
      let missing = null;
      for (const [i, f] of spec.fields.entries()) {
        const empty = f.required && !fields[f.name];
        inputs[i].classList.toggle("invalid", Boolean(empty));
        if (empty && !missing) missing = f.placeholder;
      }
      let parsed;
      try {
        parsed = JSON.parse(value.value);
        value.classList.remove("invalid");
      } catch (e) {
        value.classList.add("invalid");
        note.className = "note error";
        note.textContent = value.value.trim() ? `not JSON: ${e.message}` : "the value is required (JSON, e.g. null)";
        return null;
      }
      if (missing) {
        note.className = "note error";
        note.textContent = `${missing} is required`;
        return null;
      }
      note.className = "note ok";
      note.textContent = "valid JSON";
      return { path: spec.path(fields), body: spec.body(fields, parsed) };
    }
    const check = () => { go.disabled = body() === null; };
    for (const f of [value, ...inputs]) f.addEventListener("input", check);
    check();

    out.addEventListener("submit", async (ev) => {
      ev.preventDefault();
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
        // A 400 names the field it refuses; a 404 or a 409 is the thread's, not a field's.
        const field = e.status === 400 && /\(([\w.]+)\)$/.exec(e.message);
        const named = field && inputs.find((i) => i.name === field[1].split(".")[0]);
        if (named) named.classList.add("invalid");
        else if (field && field[1].startsWith("value")) value.classList.add("invalid");
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

  return { form, signal };
})();
