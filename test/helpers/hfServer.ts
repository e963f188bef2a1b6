// A minimal Hugging Face stand-in on 127.0.0.1 for model-source tests (HF_ENDPOINT points at it), with
// Hugging Face's URL layout as node-llama-cpp 3.21 requests it:
//   GET {HF_ENDPOINT}/v2/{owner}/{repo}/manifests/{QUANT}        (quant form; User-Agent: llama-cpp)
//     → {"ggufFile": {"rfilename": "..."}}
//   GET {HF_ENDPOINT}/{owner}/{repo}/resolve/{branch}/{file}?download=true   (with and without Range)
// Files and manifests are registered by path; responses can be cut or stalled; every request is logged.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the fake hub received. */
export type Logged = {
  method: string;
  path: string;
  range: string | undefined;
  userAgent: string | undefined;
};
/** What the hub does with one file request: serve normally, cut after N body bytes, or stall after N bytes. */
export type Action =
  | { kind: "serve" }
  | { kind: "cut"; afterBytes: number }
  | { kind: "stall"; afterBytes: number };

/**
 * A minimal Hugging Face stand-in on 127.0.0.1 with Range support and fault injection.
 * `files`: URL path (e.g. `/owner/repo/resolve/main/m.gguf`) to body; `manifests`: manifest URL path
 * (`/v2/owner/repo/manifests/Q8_0`) to the file name it announces. Unknown paths answer 404.
 */
export class FakeHub {
  readonly files = new Map<string, Buffer>();
  readonly manifests = new Map<string, string>();
  readonly log: Logged[] = [];
  /** Decides the fate of each file GET from its path and raw `Range` header; default serve. */
  fault: ((path: string, range: string | undefined) => Action) | undefined;
  private server: Server | undefined;
  private readonly stalled = new Set<ServerResponse>();
  origin = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((done) => this.server?.listen(0, "127.0.0.1", done));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const res of this.stalled) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((done) => this.server?.close(() => done()));
  }

  /** Requests since index `from` for paths containing `fragment`. */
  requests(fragment: string, from = 0): Logged[] {
    return this.log.slice(from).filter((entry) => entry.path.includes(fragment));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    res.on("error", () => undefined);
    req.socket.on("error", () => undefined);
    const url = new URL(req.url ?? "/", this.origin);
    const range = typeof req.headers.range === "string" ? req.headers.range : undefined;
    this.log.push({
      method: req.method ?? "",
      path: url.pathname,
      range,
      userAgent: req.headers["user-agent"],
    });

    const manifest = /^\/v2\/([^/]+)\/([^/]+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (manifest) {
      const rfilename = this.manifests.get(url.pathname);
      res.setHeader("content-type", "application/json");
      if (rfilename === undefined) {
        res.statusCode = 404;
        res.end(JSON.stringify({ error: "Repository not found" }));
      } else {
        res.end(JSON.stringify({ ggufFile: { rfilename, size: this.files.size } }));
      }
      return;
    }

    const body = this.files.get(url.pathname);
    if (body === undefined) {
      res.statusCode = 404;
      res.setHeader("x-error-code", "EntryNotFound");
      res.end("Entry not found");
      return;
    }
    res.setHeader("accept-ranges", "bytes");
    res.setHeader("content-type", "application/octet-stream");
    let start = 0;
    let end = body.length - 1;
    const match = range === undefined ? null : /^bytes=(\d+)-(\d*)$/.exec(range);
    if (match) {
      start = Number(match[1]);
      if (match[2] !== "") end = Math.min(Number(match[2]), body.length - 1);
      if (start >= body.length) {
        res.statusCode = 416;
        res.setHeader("content-range", `bytes */${body.length}`);
        res.end();
        return;
      }
      res.statusCode = 206;
      res.setHeader("content-range", `bytes ${start}-${end}/${body.length}`);
    }
    res.setHeader("content-length", String(end - start + 1));
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const slice = body.subarray(start, end + 1);
    const action = this.fault?.(url.pathname, range) ?? { kind: "serve" };
    if (action.kind === "serve") {
      res.end(slice);
    } else if (action.kind === "cut") {
      res.write(slice.subarray(0, action.afterBytes), () => setTimeout(() => res.destroy(), 20));
    } else {
      this.stalled.add(res);
      res.write(slice.subarray(0, action.afterBytes));
    }
  }
}
