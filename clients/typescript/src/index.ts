/**
 * A client for the HTTP endpoint of a Cairn engine (`cairn serve`).
 *
 * ```ts
 * const client = new CairnClient({ url: "http://127.0.0.1:8700", token });
 * const started = await client.start("research-agent", { question: "What is a lease?" }, {}, 30_000);
 * ```
 */
export * from "./client.js";
export * from "./errors.js";
export * from "./models.js";
export * from "./routes.js";
