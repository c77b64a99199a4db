/** Server-Sent Events over a `fetch` body (a `ReadableStream`): works in Node 20 and browsers. */

export interface Message {
  event: string;
  data: string;
}

/** The messages of an SSE stream (`event:` and `data:` fields, a blank line ends one). */
export async function* messages(body: ReadableStream<Uint8Array>): AsyncGenerator<Message> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, "");
        buffer = buffer.slice(nl + 1);
        if (line === "") {
          if (data.length) yield { event, data: data.join("\n") };
          event = "message";
          data = [];
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (name === "event") event = value;
          else if (name === "data") data.push(value);
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
