/** Server-Sent Events over a `fetch` body (a `ReadableStream`): works in Node 20 and browsers. */

export interface Message {
  event: string;
  data: string;
  /** The `id:` field (a durable item's seq), if the message has one. */
  id?: string;
}

/** The messages of an SSE stream (`event:`, `data:` and `id:` fields, a blank line ends one). */
export async function* messages(body: ReadableStream<Uint8Array>): AsyncGenerator<Message> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  let id: string | undefined;
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
          if (data.length) yield id === undefined ? { event, data: data.join("\n") } : { event, data: data.join("\n"), id };
          event = "message";
          data = [];
          id = undefined;
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (name === "event") event = value;
          else if (name === "data") data.push(value);
          else if (name === "id") id = value;
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
