// Model sources (src/models/): local paths, hf: URIs and URLs downloaded through node-llama-cpp into a
// cache folder. A local HTTP server on 127.0.0.1 plays Hugging Face (HF_ENDPOINT points at it; see
// test/helpers/hfServer.ts for the URL layout). It serves ../shared/models/stories260K.gguf (1,185,376 bytes) and ggml-vocab-llama-bpe.gguf (7,818,140
// bytes, bigger than ipull's 5 MB chunk), can cut or stall responses, and logs every request.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  cacheRecordPath,
  classifyModelSource,
  createProgressReporter,
  defaultDownloadDir,
  formatModelList,
  listModels,
  ModelSourceError,
  modelIdFromSource,
  parseHuggingFaceUri,
  pullModel,
  readCacheRecord,
  resolveModel,
} from "../../src/models/index.ts";
import { sharedModelsDir } from "../../src/paths.ts";
import { saveEnv } from "../helpers/env.ts";
import { FakeHub } from "../helpers/hfServer.ts";

const storiesPath = resolve(sharedModelsDir, "stories260K.gguf");
const stories = readFileSync(storiesPath);
const vocab = readFileSync(resolve(sharedModelsDir, "ggml-vocab-llama-bpe.gguf"));
const chunk = 5 * 1024 * 1024; // ipull's default chunk size

const hub = new FakeHub();
// Created at load time: describe() bodies (which call freshDir) run before the before() hooks.
const root = mkdtempSync(join(tmpdir(), "lmserve-model-sources-"));
let dirCount = 0;
const restoreEnv = saveEnv(["HF_ENDPOINT", "MODEL_ENDPOINT"]);

/** A fresh, empty download folder. */
function freshDir(): string {
  return join(root, `dl-${++dirCount}`);
}

/** Files in a download folder (empty when it does not exist). */
function filesIn(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}

/** Asserts `promise` rejects with a ModelSourceError of `code` whose message is one line matching `pattern`. */
async function rejectsWith(
  promise: Promise<unknown>,
  code: string,
  pattern: RegExp,
): Promise<ModelSourceError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ModelSourceError, `expected a ModelSourceError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  assert.ok(!caught.message.includes("\n"), "message is one line");
  assert.match(caught.message, pattern);
  return caught;
}

before(async () => {
  const resolvePath = (repo: string, file: string) => `/owner/${repo}/resolve/main/${file}`;
  hub.files.set(resolvePath("repo", "stories260K.gguf"), stories);
  hub.files.set(resolvePath("repo", "interrupted.gguf"), stories);
  hub.files.set(resolvePath("tiny-stories-GGUF", "stories260K-Q8_0.gguf"), stories);
  hub.files.set(
    resolvePath("repo", "garbage.gguf"),
    Buffer.from(`<!DOCTYPE html><html>${"x".repeat(4000)}</html>`),
  );
  hub.files.set(resolvePath("repo", "truncated.gguf"), stories.subarray(0, Math.floor(stories.length * 0.6)));
  hub.files.set(resolvePath("vocab", "ggml-vocab-llama-bpe.gguf"), vocab);
  hub.files.set("/downloads/v1/stories260K.gguf", stories);
  hub.files.set("/downloads/v1/not-a-model.gguf", Buffer.from("PK\x03\x04 this is a zip, not a model"));
  hub.manifests.set("/v2/owner/tiny-stories-GGUF/manifests/Q8_0", "stories260K-Q8_0.gguf");
  await hub.start();
  // node-llama-cpp resolves the Hugging Face endpoint from these on every call (MODEL_ENDPOINT wins).
  delete process.env.MODEL_ENDPOINT;
  process.env.HF_ENDPOINT = hub.origin;
});

after(async () => {
  await hub.stop();
  restoreEnv();
  rmSync(root, { recursive: true, force: true });
});

describe("hf: URIs through HF_ENDPOINT", () => {
  const dir = freshDir();

  test("hf:owner/repo/file.gguf downloads once, byte for byte, and records its source", async () => {
    const mark = hub.log.length;
    const progress: number[] = [];
    const model = await resolveModel("hf:owner/repo/stories260K.gguf", {
      downloadDir: dir,
      onProgress: (p) => progress.push(p.downloadedSize),
    });
    assert.equal(model.id, "stories260K");
    assert.equal(model.kind, "hf");
    assert.equal(model.downloaded, true);
    assert.equal(model.sizeBytes, stories.length);
    assert.equal(model.path, join(dir, "hf_owner_repo_stories260K.gguf"));
    assert.ok(readFileSync(model.path).equals(stories), "downloaded file equals the source");
    assert.ok(progress.length > 0 && progress.at(-1) === stories.length, "progress reaches the file size");

    const seen = hub.requests("/owner/repo/resolve/main/stories260K.gguf", mark);
    assert.ok(seen.length >= 2, "probe + download requests");
    assert.ok(seen.every((r) => r.method === "GET"));

    const record = await readCacheRecord(model.path);
    assert.equal(record?.source, "hf:owner/repo/stories260K.gguf");
    assert.equal(record?.id, "stories260K");
    assert.equal(record?.sizeBytes, stories.length);
    assert.equal(record?.architecture, "llama");
    assert.deepEqual(filesIn(dir), [
      "hf_owner_repo_stories260K.gguf",
      "hf_owner_repo_stories260K.gguf.lmserve.json",
    ]);
  });

  test("a second resolve reuses the cache without any request", async () => {
    const mark = hub.log.length;
    const model = await resolveModel("hf:owner/repo/stories260K.gguf", { downloadDir: dir });
    assert.equal(model.downloaded, false);
    assert.equal(model.id, "stories260K");
    assert.deepEqual(hub.log.slice(mark), [], "no request reached the server");
  });

  test("a cached file that went bad is deleted and downloaded again", async () => {
    const path = join(dir, "hf_owner_repo_stories260K.gguf");
    writeFileSync(path, Buffer.alloc(stories.length, 0x41)); // same size, wrong content
    const model = await resolveModel("hf:owner/repo/stories260K.gguf", { downloadDir: dir });
    assert.equal(model.downloaded, true);
    assert.ok(readFileSync(model.path).equals(stories));
  });

  test("hf:owner/repo:Q8_0 resolves through the manifest and is reused offline", async () => {
    const mark = hub.log.length;
    const model = await resolveModel("hf:owner/tiny-stories-GGUF:Q8_0", { downloadDir: dir });
    assert.equal(model.path, join(dir, "hf_owner_tiny-stories.Q8_0.gguf"));
    assert.equal(model.id, "tiny-stories.Q8_0");
    assert.ok(readFileSync(model.path).equals(stories));
    const manifest = hub.requests("/v2/owner/tiny-stories-GGUF/manifests/Q8_0", mark);
    assert.ok(manifest.length >= 1 && manifest.every((r) => r.userAgent === "llama-cpp"));
    assert.ok(hub.requests("/owner/tiny-stories-GGUF/resolve/main/stories260K-Q8_0.gguf", mark).length >= 2);

    const again = hub.log.length;
    const cached = await resolveModel("hf:owner/tiny-stories-GGUF:q8_0", { downloadDir: dir });
    assert.equal(cached.downloaded, false);
    assert.equal(cached.path, model.path);
    assert.equal(cached.id, "tiny-stories.Q8_0");
    assert.deepEqual(hub.log.slice(again), []);
  });
});

describe("interrupted downloads", () => {
  test("a connection dropped mid-transfer is retried with a Range request and the file is complete", async () => {
    const dir = freshDir();
    const path = "/owner/repo/resolve/main/interrupted.gguf";
    let cuts = 0;
    // Cut the first full-file ranged transfer (ipull's download, not the probe's header read) after 64 KiB.
    hub.fault = (p, range) =>
      p === path && range === `bytes=0-${stories.length - 1}` && cuts++ === 0
        ? { kind: "cut", afterBytes: 64 * 1024 }
        : { kind: "serve" };
    const mark = hub.log.length;
    try {
      const model = await resolveModel("hf:owner/repo/interrupted.gguf", { downloadDir: dir });
      assert.ok(readFileSync(model.path).equals(stories));
    } finally {
      hub.fault = undefined;
    }
    assert.ok(cuts >= 2, "the server cut one transfer and was asked again");
    const ranged = hub.requests(path, mark).filter((r) => r.range === `bytes=0-${stories.length - 1}`);
    assert.ok(ranged.length >= 2, `a Range retry followed the cut (${JSON.stringify(ranged)})`);
    assert.deepEqual(filesIn(dir), [
      "hf_owner_repo_interrupted.gguf",
      "hf_owner_repo_interrupted.gguf.lmserve.json",
    ]);
  });

  test("a cancelled download keeps its finished chunks and the next run resumes with Range", async () => {
    const dir = freshDir();
    const source = "hf:owner/vocab/ggml-vocab-llama-bpe.gguf";
    const path = "/owner/vocab/resolve/main/ggml-vocab-llama-bpe.gguf";
    const partial = join(dir, "hf_owner_vocab_ggml-vocab-llama-bpe.gguf.ipull");
    // Run 1: chunk 0 (bytes 0..5 MiB) is served, chunk 1 stalls; we cancel once ipull has saved its progress.
    hub.fault = (p, range) =>
      p === path && range?.startsWith(`bytes=${chunk}-`)
        ? { kind: "stall", afterBytes: 1000 }
        : { kind: "serve" };
    const controller = new AbortController();
    const poll = setInterval(() => {
      if (existsSync(partial) && statSync(partial).size > vocab.length) controller.abort(); // progress JSON appended
    }, 20);
    try {
      await rejectsWith(
        resolveModel(source, { downloadDir: dir, signal: controller.signal }),
        "cancelled",
        /^Download of hf:owner\/vocab\/ggml-vocab-llama-bpe\.gguf was cancelled; .* the next attempt resumes it\.$/,
      );
    } finally {
      clearInterval(poll);
      hub.fault = undefined;
    }
    assert.ok(existsSync(partial), "the partial download is kept");
    assert.ok(!existsSync(join(dir, "hf_owner_vocab_ggml-vocab-llama-bpe.gguf")));

    // Run 2: only the missing chunk is requested.
    const mark = hub.log.length;
    const model = await resolveModel(source, { downloadDir: dir });
    assert.equal(model.downloaded, true);
    assert.ok(readFileSync(model.path).equals(vocab), "resumed file equals the source");
    const transfers = hub.requests(path, mark).filter((r) => r.range?.endsWith(`-${vocab.length - 1}`));
    assert.deepEqual(
      transfers.map((r) => r.range),
      [`bytes=${chunk}-${vocab.length - 1}`],
      "the resumed run asked only for the unfinished chunk",
    );
    assert.ok(
      !hub.requests(path, mark).some((r) => r.range === `bytes=0-${chunk - 1}`),
      "the finished chunk was not downloaded again",
    );
    assert.ok(!existsSync(partial));
  });
});

describe("errors", () => {
  test("a missing hf file is a one-line not_found error and leaves nothing behind", async () => {
    const dir = freshDir();
    await rejectsWith(
      resolveModel("hf:owner/repo/missing.gguf", { downloadDir: dir }),
      "not_found",
      /^Model not found: hf:owner\/repo\/missing\.gguf \(HTTP 404\)\. /,
    );
    assert.deepEqual(filesIn(dir), []);
  });

  test("an unknown quantization is not_found", async () => {
    await rejectsWith(
      resolveModel("hf:owner/tiny-stories-GGUF:Q2_K", { downloadDir: freshDir() }),
      "not_found",
      /^Model not found: hf:owner\/tiny-stories-GGUF:Q2_K \(Hugging Face has no such repository, or no "Q2_K" GGUF file in it\)\.$/,
    );
  });

  test("a missing URL is not_found", async () => {
    const dir = freshDir();
    await rejectsWith(
      resolveModel(`${hub.origin}/downloads/v1/missing.gguf?token=secret`, { downloadDir: dir }),
      "not_found",
      /^Model not found: http:\/\/127\.0\.0\.1:\d+\/downloads\/v1\/missing\.gguf \(HTTP 404\)\.$/,
    );
    assert.deepEqual(filesIn(dir), []);
  });

  test("a remote file that is not GGUF is refused before anything is downloaded", async () => {
    const dir = freshDir();
    const mark = hub.log.length;
    await rejectsWith(
      resolveModel("hf:owner/repo/garbage.gguf", { downloadDir: dir }),
      "corrupt",
      /^hf:owner\/repo\/garbage\.gguf is not a GGUF model file \(.*\); nothing was downloaded\.$/,
    );
    assert.ok(
      hub.requests("garbage.gguf", mark).every((r) => r.range !== undefined),
      "only ranged probe reads",
    );
    assert.deepEqual(filesIn(dir), []);
    await rejectsWith(
      resolveModel(`${hub.origin}/downloads/v1/not-a-model.gguf`, { downloadDir: dir }),
      "corrupt",
      /is not a GGUF model file .*nothing was downloaded\.$/,
    );
    assert.deepEqual(filesIn(dir), []);
  });

  test("a truncated download is refused and deleted from the cache", async () => {
    const dir = freshDir();
    await rejectsWith(
      resolveModel("hf:owner/repo/truncated.gguf", { downloadDir: dir }),
      "corrupt",
      /^The file downloaded for hf:owner\/repo\/truncated\.gguf is not a valid GGUF model: it is truncated .*It was deleted from the cache\.$/,
    );
    assert.deepEqual(filesIn(dir), []);
  });

  test("an unreachable endpoint fails fast with unreachable (hfEndpoint option overrides HF_ENDPOINT)", async () => {
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, "127.0.0.1", done));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((done) => closed.close(() => done()));
    const started = Date.now();
    await rejectsWith(
      resolveModel("hf:owner/repo/stories260K.gguf", {
        downloadDir: freshDir(),
        hfEndpoint: `http://127.0.0.1:${port}`,
      }),
      "unreachable",
      /^Cannot reach Hugging Face \(or HF_ENDPOINT\) for hf:owner\/repo\/stories260K\.gguf \(ECONNREFUSED|fetch failed\)/,
    );
    await rejectsWith(
      resolveModel(`http://127.0.0.1:${port}/m.gguf`, { downloadDir: freshDir() }),
      "unreachable",
      /^Cannot reach 127\.0\.0\.1:\d+ for http:\/\/127\.0\.0\.1:\d+\/m\.gguf \(ECONNREFUSED\)/,
    );
    // A hang guard only, far above any machine's time for two refused connections: ipull's default of
    // ~150 retries with backoff would take many minutes.
    assert.ok(Date.now() - started < 120_000, "no long retry loop");
  });

  test("an already-aborted signal cancels before any request", async () => {
    const mark = hub.log.length;
    await rejectsWith(
      resolveModel("hf:owner/repo/stories260K.gguf", {
        downloadDir: freshDir(),
        signal: AbortSignal.abort(),
      }),
      "cancelled",
      /was cancelled/,
    );
    assert.deepEqual(hub.log.slice(mark), []);
  });

  test("invalid hf: URIs are invalid_source", async () => {
    await rejectsWith(
      resolveModel("hf:owner", { downloadDir: freshDir() }),
      "invalid_source",
      /^Invalid Hugging Face/,
    );
    await rejectsWith(
      resolveModel("hf:/repo/x.gguf", { downloadDir: freshDir() }),
      "invalid_source",
      /hf:owner/,
    );
    await rejectsWith(resolveModel("  ", { downloadDir: freshDir() }), "invalid_source", /^No model given/);
  });
});

describe("URLs", () => {
  test("an http:// URL to a .gguf downloads once and is reused offline", async () => {
    const dir = freshDir();
    const url = `${hub.origin}/downloads/v1/stories260K.gguf`;
    const model = await resolveModel(url, { downloadDir: dir });
    assert.equal(model.kind, "url");
    assert.equal(model.id, "stories260K");
    assert.match(model.path, /url_[0-9a-f]{8}_stories260K\.gguf$/);
    assert.ok(readFileSync(model.path).equals(stories));
    assert.equal((await readCacheRecord(model.path))?.source, url);

    const mark = hub.log.length;
    const cached = await resolveModel(url, { downloadDir: dir });
    assert.equal(cached.downloaded, false);
    assert.equal(cached.path, model.path);
    assert.deepEqual(hub.log.slice(mark), []);
  });
});

describe("local paths", () => {
  test("an existing GGUF file resolves to itself", async () => {
    const model = await resolveModel(storiesPath, { downloadDir: freshDir() });
    assert.deepEqual(model, {
      path: storiesPath,
      id: "stories260K",
      kind: "path",
      source: storiesPath,
      sizeBytes: stories.length,
      downloaded: false,
    });
  });

  test("a missing file is a one-line not_found error naming the accepted forms", async () => {
    const missing = join(root, "nope.gguf");
    const error = await rejectsWith(
      resolveModel(missing, { downloadDir: freshDir() }),
      "not_found",
      /^Model file/,
    );
    assert.equal(
      error.message,
      `Model file not found: ${missing}. Pass a path to a .gguf file, an hf:owner/repo/file.gguf URI or an https:// URL.`,
    );
  });

  test("a directory and a non-GGUF file are refused", async () => {
    await rejectsWith(resolveModel(root, { downloadDir: freshDir() }), "unreadable", /is a directory/);
    const text = join(root, "notes.gguf");
    writeFileSync(text, "hello");
    await rejectsWith(resolveModel(text, { downloadDir: freshDir() }), "corrupt", /^Not a GGUF model file: /);
  });
});

describe("pull and list", () => {
  const dir = freshDir();

  test("pullModel prints plain progress lines off a TTY, then a summary", async () => {
    let out = "";
    const stream = { write: (s: string) => (out += s) };
    const model = await pullModel("hf:owner/repo/stories260K.gguf", { downloadDir: dir, stream });
    assert.equal(model.downloaded, true);
    const lines = out.trimEnd().split("\n");
    assert.match(lines.at(-2) ?? "", /^downloading stories260K\.gguf: 100% \(1\.2\/1\.2 MB\)$/);
    assert.equal(lines.at(-1), `Downloaded stories260K (1.2 MB) to ${model.path}`);
    assert.ok(!out.includes("\r"));

    out = "";
    await pullModel("hf:owner/repo/stories260K.gguf", { downloadDir: dir, stream });
    assert.equal(out, `stories260K is already available at ${model.path} (1.2 MB)\n`);
  });

  test("listModels shows cached models with sizes and sources, and partial downloads", async () => {
    await resolveModel(`${hub.origin}/downloads/v1/stories260K.gguf`, { downloadDir: dir });
    writeFileSync(join(dir, "hf_owner_big.gguf.ipull"), Buffer.alloc(1000));
    writeFileSync(join(dir, "README.txt"), "ignored");
    const models = await listModels(dir);
    assert.deepEqual(
      models.map((m) => [m.id, m.sizeBytes, m.source ?? null, m.complete]),
      [
        ["hf_owner_big", 1000, null, false],
        ["stories260K", stories.length, "hf:owner/repo/stories260K.gguf", true],
        ["stories260K", stories.length, `${hub.origin}/downloads/v1/stories260K.gguf`, true],
      ],
    );
    const table = formatModelList(models, dir);
    const lines = table.trimEnd().split("\n");
    assert.equal(lines[0], `Models in ${resolve(dir)}:`);
    assert.match(lines[1] ?? "", /^ID\s+SIZE\s+ARCH\s+SOURCE\s+FILE$/);
    assert.match(
      table,
      /stories260K\s+1\.2 MB\s+llama\s+hf:owner\/repo\/stories260K\.gguf\s+hf_owner_repo_stories260K\.gguf/,
    );
    assert.match(table, /hf_owner_big\s+1\.0 KB\s+-\s+\(partial download\)\s+hf_owner_big\.gguf\.ipull/);
    assert.equal(lines.at(-1), "2 models, 2.4 MB");
    assert.equal(existsSync(cacheRecordPath(join(dir, "hf_owner_repo_stories260K.gguf"))), true);
  });

  test("an empty or missing download folder lists nothing", async () => {
    const missing = join(root, "never-created");
    assert.deepEqual(await listModels(missing), []);
    assert.equal(formatModelList([], missing), `No models cached in ${missing}\n`);
  });
});

describe("helpers", () => {
  test("defaultDownloadDir follows XDG_CACHE_HOME, else ~/.cache", () => {
    assert.equal(defaultDownloadDir({ XDG_CACHE_HOME: "/xdg" }, "/home/u"), "/xdg/lmserve/models");
    assert.equal(defaultDownloadDir({}, "/home/u"), "/home/u/.cache/lmserve/models");
    assert.equal(defaultDownloadDir({ XDG_CACHE_HOME: "" }, "/home/u"), "/home/u/.cache/lmserve/models");
    assert.equal(defaultDownloadDir({ XDG_CACHE_HOME: "rel" }, "/home/u"), "/home/u/.cache/lmserve/models");
  });

  test("sources are classified and parsed like node-llama-cpp", () => {
    assert.equal(classifyModelSource("hf:a/b:Q4_K_M"), "hf");
    assert.equal(classifyModelSource("HF://a/b/c.gguf"), "hf");
    assert.equal(classifyModelSource("huggingface.co/a/b"), "hf");
    assert.equal(classifyModelSource("HTTPS://x/y.gguf"), "url");
    assert.equal(classifyModelSource("./models/x.gguf"), "path");
    assert.deepEqual(parseHuggingFaceUri("hf:a/b:q4_k_m"), {
      owner: "a",
      repo: "b",
      form: "quant",
      tag: "Q4_K_M",
    });
    assert.deepEqual(parseHuggingFaceUri("hf:a/b"), { owner: "a", repo: "b", form: "quant" });
    assert.deepEqual(parseHuggingFaceUri("hf:a/b/dir/f.gguf#dev"), {
      owner: "a",
      repo: "b",
      form: "file",
      filePath: "dir/f.gguf",
      branch: "dev",
    });
    assert.equal(modelIdFromSource("hf:a/b/dir/m-00001-of-00003.gguf", "/c/x.gguf"), "m");
    assert.equal(
      modelIdFromSource(
        "hf:bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
        "/c/hf_bartowski_Llama-3.2-1B-Instruct.Q4_K_M.gguf",
      ),
      "Llama-3.2-1B-Instruct.Q4_K_M",
    );
    assert.equal(modelIdFromSource("https://h/a/My%20Model.GGUF?x=1", "/c/u.gguf"), "My Model");
  });

  test("progress: plain lines every 10% off a TTY", () => {
    let out = "";
    const reporter = createProgressReporter({
      stream: { write: (s: string) => (out += s) },
      label: "m",
      tty: false,
    });
    for (let done = 0; done <= 3_000_000; done += 100_000)
      reporter.update({ totalSize: 3_000_000, downloadedSize: done });
    reporter.finish();
    const lines = out.trimEnd().split("\n");
    assert.equal(lines.length, 11);
    assert.equal(lines[0], "downloading m: 0% (0.0/3.0 MB)");
    assert.equal(lines[4], "downloading m: 40% (1.2/3.0 MB)");
    assert.equal(lines[10], "downloading m: 100% (3.0/3.0 MB)");
  });

  test("progress: one redrawn bar with speed on a TTY", () => {
    let out = "";
    let now = 0;
    const reporter = createProgressReporter({
      stream: { write: (s: string) => (out += s), isTTY: true, columns: 200 },
      label: "m",
      now: () => now,
    });
    reporter.update({ totalSize: 4_000_000, downloadedSize: 0 });
    now = 50;
    reporter.update({ totalSize: 4_000_000, downloadedSize: 100_000 }); // throttled
    now = 1000;
    reporter.update({ totalSize: 4_000_000, downloadedSize: 2_000_000 });
    reporter.finish();
    const frames = out.split("\r").filter((f) => f !== "");
    assert.equal(frames.length, 3);
    assert.match(frames[1] ?? "", /^m \[█{12}░{12}\] {2}50% 2\.0\/4\.0 MB 2\.0 MB\/s ETA 1s\x1b\[K$/);
    assert.match(frames[2] ?? "", /100% 4\.0\/4\.0 MB .*\x1b\[K\n$/);
  });
});
