// The server every test runs against: a real `cairn serve` on a fresh temporary file
// ($CAIRN_BIN, else the workspace's target/debug/cairn), restartable on the same address. It is
// served with the key ring `server.keys` as CAIRN_KEYS (none by default: CAIRN_KEYS and
// CAIRN_KEYS_FILE are not passed on).
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
  /** A server on a fresh file; `keys`: the key ring it serves with (docs/encryption.md). */
  static async start({ keys } = {}) {
    const dir = mkdtempSync(join(tmpdir(), "cairn-ts-"));
    const server = new Server(dir, join(dir, "cairn.db"));
    server.keys = keys;
    server.cli("init");
    await server.run();
    return server;
  }

  constructor(dir, db) {
    this.dir = dir;
    this.db = db;
    this.addr = "127.0.0.1:0";
  }

  /** The environment of a command on the file: this one's, with `keys` as the only ring. */
  env() {
    const { CAIRN_KEYS: _keys, CAIRN_KEYS_FILE: _file, ...env } = process.env;
    return this.keys === undefined ? env : { ...env, CAIRN_KEYS: this.keys };
  }

  /** `cairn ARGS... --db FILE`, which must succeed (a command that writes needs the server
   * stopped: the file is held while it serves). */
  cli(...args) {
    execFileSync(cairnBin(), [...args, "--db", this.db], { stdio: "ignore", env: this.env() });
  }

  async run() {
    this.process = spawn(cairnBin(), ["serve", "--db", this.db, "--addr", this.addr, "--json"], {
      stdio: ["ignore", "pipe", "ignore"],
      env: this.env(),
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
