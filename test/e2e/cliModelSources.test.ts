// The model sources through the command line: `lmserve pull`, `lmserve list` and `lmserve serve` with
// hf: URIs and URLs, against a local Hugging Face stand-in (test/helpers/hfServer.ts) that the children
// reach through HF_ENDPOINT. Nothing leaves 127.0.0.1; XDG_CACHE_HOME points into a temporary folder so
// the default download folder never touches the real home directory.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { projectRoot, sharedModelsDir } from "../../src/paths.ts";
import { saveEnv } from "../helpers/env.ts";
import { FakeHub } from "../helpers/hfServer.ts";
import { type ProcessOutput, runProcess } from "../helpers/runProcess.ts";
import { startTestServer } from "../helpers/testServer.ts";

const stories = readFileSync(resolve(sharedModelsDir, "stories260K.gguf"));
const GREEDY_START = ", there was a little girl named Lily";

const hub = new FakeHub();
const root = mkdtempSync(join(tmpdir(), "lmserve-cli-sources-"));
const dir = join(root, "models");
const xdg = join(root, "xdg");
const restoreEnv = saveEnv(["HF_ENDPOINT", "MODEL_ENDPOINT", "HF_TOKEN", "XDG_CACHE_HOME"]);

/** Runs `lmserve ARGS` to completion (asynchronously: the fake hub lives in this process). */
function lmserve(args: string[]): Promise<ProcessOutput> {
  return runProcess(process.execPath, [resolve(projectRoot, "bin/lmserve.js"), ...args], {
    env: process.env,
  });
}

/** The lines of a non-TTY output, without the trailing empty line. */
function lines(text: string): string[] {
  return text.trimEnd().split("\n");
}

before(async () => {
  hub.files.set("/owner/repo/resolve/main/stories260K.gguf", stories);
  hub.files.set("/owner/tiny-stories-GGUF/resolve/main/stories260K-Q8_0.gguf", stories);
  hub.files.set("/downloads/v1/stories260K.gguf", stories);
  hub.manifests.set("/v2/owner/tiny-stories-GGUF/manifests/Q8_0", "stories260K-Q8_0.gguf");
  await hub.start();
  // Children inherit these (startTestServer spawns with this process's environment).
  process.env.HF_ENDPOINT = hub.origin;
  process.env.XDG_CACHE_HOME = xdg;
  delete process.env.MODEL_ENDPOINT;
  delete process.env.HF_TOKEN;
});

after(async () => {
  await hub.stop();
  restoreEnv();
  rmSync(root, { recursive: true, force: true });
});

describe("lmserve pull / list / serve with hf: URIs", () => {
  const cached = join(dir, "hf_owner_repo_stories260K.gguf");

  it("pull downloads with plain progress lines off a TTY and exits 0", async () => {
    const mark = hub.log.length;
    const { status, stdout, stderr } = await lmserve([
      "pull",
      "hf:owner/repo/stories260K.gguf",
      "--download-dir",
      dir,
    ]);
    assert.equal(status, 0, stderr);
    assert.equal(stdout, "");
    assert.ok(!stderr.includes("\r"), "no bar redraws off a TTY");
    const out = lines(stderr);
    assert.ok(
      out
        .slice(0, -1)
        .every((line) => /^downloading stories260K\.gguf: \d{1,3}% \(\d+\.\d\/1\.2 MB\)$/.test(line)),
      stderr,
    );
    assert.equal(out.at(-2), "downloading stories260K.gguf: 100% (1.2/1.2 MB)");
    assert.equal(out.at(-1), `Downloaded stories260K (1.2 MB) to ${cached}`);
    assert.ok(readFileSync(cached).equals(stories), "the cached file equals the source");
    assert.ok(
      hub.requests("/owner/repo/resolve/main/stories260K.gguf", mark).length >= 2,
      "probe + download",
    );
  });

  it("pull of a cached model does not download again", async () => {
    const mark = hub.log.length;
    const { status, stderr } = await lmserve([
      "pull",
      "hf:owner/repo/stories260K.gguf",
      "--download-dir",
      dir,
    ]);
    assert.equal(status, 0, stderr);
    assert.equal(stderr, `stories260K is already available at ${cached} (1.2 MB)\n`);
    assert.deepEqual(hub.log.slice(mark), []);
  });

  it("list shows the cached model with its size and source", async () => {
    const { status, stdout, stderr } = await lmserve(["list", "--download-dir", dir]);
    assert.equal(status, 0, stderr);
    const out = lines(stdout);
    assert.equal(out[0], `Models in ${dir}:`);
    assert.match(out[1] ?? "", /^ID\s+SIZE\s+ARCH\s+SOURCE\s+FILE$/);
    assert.match(
      out[2] ?? "",
      /^stories260K\s+1\.2 MB\s+llama\s+hf:owner\/repo\/stories260K\.gguf\s+hf_owner_repo_stories260K\.gguf$/,
    );
    assert.equal(out.at(-1), "1 model, 1.2 MB");
  });

  it("serve hf:… serves the cached file under its id without a new download", async () => {
    const mark = hub.log.length;
    const server = await startTestServer(["hf:owner/repo/stories260K.gguf", "--download-dir", dir]);
    try {
      const models = await server.client.models.list();
      assert.deepEqual(
        models.data.map((m) => m.id),
        ["stories260K"],
      );
      const completion = await server.client.completions.create({
        model: "stories260K",
        prompt: "Once upon a time",
        max_tokens: 12,
        temperature: 0,
      });
      assert.ok(completion.choices[0]?.text.startsWith(GREEDY_START), completion.choices[0]?.text);
      const loaded = server.logs.find((entry) => entry.msg === "model loaded");
      assert.equal(loaded?.source, "hf:owner/repo/stories260K.gguf");
      assert.equal(loaded?.path, cached);
    } finally {
      await server.stop();
    }
    assert.deepEqual(hub.log.slice(mark), [], "the hub saw no request");
  });

  it("serve of a URL downloads it on first start and --served-model-name names it", async () => {
    const url = `${hub.origin}/downloads/v1/stories260K.gguf`;
    const mark = hub.log.length;
    const server = await startTestServer([url, "--download-dir", dir, "--served-model-name", "tiny"]);
    try {
      const models = await server.client.models.list();
      assert.deepEqual(
        models.data.map((m) => m.id),
        ["tiny"],
      );
      const completion = await server.client.completions.create({
        model: "tiny",
        prompt: "Once upon a time",
        max_tokens: 12,
        temperature: 0,
      });
      assert.ok(completion.choices[0]?.text.startsWith(GREEDY_START), completion.choices[0]?.text);
    } finally {
      await server.stop();
    }
    assert.ok(hub.requests("/downloads/v1/stories260K.gguf", mark).length >= 2, "probe + download");
    const file = readdirSync(dir).find((name) => /^url_[0-9a-f]{8}_stories260K\.gguf$/.test(name));
    assert.ok(file, `the URL's file is cached (${readdirSync(dir).join(", ")})`);
    assert.ok(readFileSync(join(dir, file)).equals(stories));
  });

  it("without --download-dir, pull and list use $XDG_CACHE_HOME/lmserve/models", async () => {
    const pulled = await lmserve(["pull", "hf:owner/tiny-stories-GGUF:Q8_0"]);
    assert.equal(pulled.status, 0, pulled.stderr);
    const path = join(xdg, "lmserve", "models", "hf_owner_tiny-stories.Q8_0.gguf");
    assert.equal(lines(pulled.stderr).at(-1), `Downloaded tiny-stories.Q8_0 (1.2 MB) to ${path}`);
    assert.ok(existsSync(path));
    const listed = await lmserve(["list"]);
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(
      listed.stdout,
      /^tiny-stories\.Q8_0\s+1\.2 MB\s+llama\s+hf:owner\/tiny-stories-GGUF:Q8_0\s/m,
    );
  });

  it("a full disk (ENOSPC on a 512 KB tmpfs) is a one-line error and exit 2; no file keeps the final name", async (t) => {
    const small = join(root, "small");
    mkdirSync(small, { recursive: true });
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", small], {
      encoding: "utf8",
    });
    if (mounted.status !== 0) {
      t.skip(`cannot mount a tmpfs here: ${(mounted.stderr || String(mounted.error)).trim()}`);
      return;
    }
    try {
      const { status, stdout, stderr } = await lmserve([
        "pull",
        "hf:owner/repo/stories260K.gguf",
        "--download-dir",
        small,
      ]);
      assert.equal(status, 2, stderr);
      assert.equal(stdout, "");
      const errors = lines(stderr).filter((line) => line.startsWith("lmserve: error:"));
      assert.equal(errors.length, 1, stderr);
      assert.match(errors[0] as string, /ENOSPC|no space|disk/i);
      assert.doesNotMatch(stderr, /\n\s+at /, "no stack trace");
      assert.ok(!existsSync(join(small, "hf_owner_repo_stories260K.gguf")), "no file under the final name");
      const listed = await lmserve(["list", "--download-dir", small]);
      assert.doesNotMatch(listed.stdout, /^stories260K\s+[\d.]+ [KMG]?B\s+llama/m, "not listed as a model");
    } finally {
      spawnSync("umount", [small]);
    }
  });

  it("a source that answers 404 is a one-line error and exit code 2, for pull and serve", async () => {
    for (const args of [
      ["pull", "hf:owner/repo/missing.gguf", "--download-dir", dir],
      ["serve", "hf:owner/repo/missing.gguf", "--download-dir", dir, "--port", "0"],
    ]) {
      const { status, stdout, stderr } = await lmserve(args);
      assert.equal(status, 2, stderr);
      assert.equal(stdout, "");
      assert.equal(lines(stderr).length, 1, stderr);
      assert.match(stderr, /^lmserve: error: Model not found: hf:owner\/repo\/missing\.gguf \(HTTP 404\)\. /);
    }
    assert.ok(!existsSync(join(dir, "hf_owner_repo_missing.gguf")));
  });
});
