// The server every test runs against: a real `cairn serve` on a fresh temporary file
// ($CAIRN_BIN, else the workspace's target/debug/cairn), restartable on the same address.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { CairnClient } from "../dist/index.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export function cairnBin() {
  const bin = process.env.CAIRN_BIN ?? join(repo, "target", "debug", "cairn");
  if (!existsSync(bin)) throw new Error(`no cairn binary at ${bin}: build it or set CAIRN_BIN`);
  return bin;
}

export class Server {
  static async start() {
    const dir = mkdtempSync(join(tmpdir(), "cairn-ts-"));
    const server = new Server(dir, join(dir, "cairn.db"));
    execFileSync(cairnBin(), ["init", "--db", server.db], { stdio: "ignore" });
    await server.run();
    return server;
  }

  constructor(dir, db) {
    this.dir = dir;
    this.db = db;
    this.addr = "127.0.0.1:0";
  }

  async run() {
    this.process = spawn(cairnBin(), ["serve", "--db", this.db, "--addr", this.addr, "--json"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    const lines = createInterface({ input: this.process.stdout });
    const [line] = await Promise.race([
      new Promise((ok) => lines.once("line", (l) => ok([l]))),
      new Promise((_, fail) => this.process.once("exit", (code) => fail(new Error(`cairn serve exited ${code}`)))),
    ]);
    const announced = JSON.parse(line);
    if (!announced.address) throw new Error(`cairn serve did not start: ${line}`);
    this.addr = announced.address;
    this.token = announced.token;
    this.url = `http://${this.addr}`;
  }

  /** Stops it as an operator would (SIGTERM, a graceful shutdown). */
  async stop() {
    if (this.process && this.process.exitCode === null) {
      const exited = new Promise((ok) => this.process.once("exit", ok));
      this.process.kill("SIGTERM");
      await exited;
    }
  }

  async restart() {
    await this.stop();
    await this.run();
  }

  async close() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  client(options = {}) {
    return new CairnClient({ url: this.url, token: this.token, ...options });
  }
}
