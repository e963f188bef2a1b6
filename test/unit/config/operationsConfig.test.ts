import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadServeConfig } from "../../../src/config/serveConfig.ts";
import { parseByteSize, parseOrigins, parseRateLimit } from "../../../src/config/values.ts";

const dir = mkdtempSync(join(tmpdir(), "lmserve-config-"));
let files = 0;
function configFile(text: string): string {
  const path = join(dir, `config-${files++}.yaml`);
  writeFileSync(path, text);
  return path;
}

describe("operational flag values", () => {
  it("parses rates with and without a unit", () => {
    assert.deepEqual(parseRateLimit("60/min"), { requests: 60, windowSeconds: 60 });
    assert.deepEqual(parseRateLimit("5/s"), { requests: 5, windowSeconds: 1 });
    assert.deepEqual(parseRateLimit("1000/hour"), { requests: 1000, windowSeconds: 3600 });
    assert.deepEqual(parseRateLimit("7"), { requests: 7, windowSeconds: 60 });
    for (const bad of ["0/min", "ten/min", "5/fortnight", "-1", "1.5/s"]) {
      assert.throws(() => parseRateLimit(bad), ConfigError, bad);
    }
  });

  it("parses byte sizes with binary units", () => {
    assert.equal(parseByteSize("1048576"), 1048576);
    assert.equal(parseByteSize("512kb"), 512 * 1024);
    assert.equal(parseByteSize("8MB"), 8 * 1024 * 1024);
    assert.throws(() => parseByteSize("0"), ConfigError);
    assert.throws(() => parseByteSize("lots"), ConfigError);
  });

  it("parses origins from repeats, comma lists and JSON lists, normalised", () => {
    assert.deepEqual(parseOrigins(["https://a.example/", "https://b.example,http://c.example:8080"]), [
      "https://a.example",
      "https://b.example",
      "http://c.example:8080",
    ]);
    assert.deepEqual(parseOrigins(['["*"]']), ["*"]);
    assert.throws(() => parseOrigins(["https://a.example/path"]), ConfigError);
    assert.throws(() => parseOrigins(["not a url"]), ConfigError);
  });

  it("defaults: no keys, no limit, 8 MiB bodies, 30 s shutdown", () => {
    const config = loadServeConfig(["model.gguf"], {}, {});
    assert.deepEqual(config.apiKeys, []);
    assert.equal(config.rateLimit, undefined);
    assert.equal(config.maxBodySize, 8 * 1024 * 1024);
    assert.equal(config.shutdownTimeout, 30);
    assert.deepEqual(config.allowedOrigins, []);
    assert.equal(config.logRequests, false);
  });

  it("takes keys from --api-key and LMSERVE_API_KEY", () => {
    const config = loadServeConfig(["m.gguf"], { apiKey: ["k1", "k2"] }, { LMSERVE_API_KEY: "k3" });
    assert.deepEqual(config.apiKeys, ["k1", "k2", "k3"]);
  });

  it("names the flag of a malformed value", () => {
    assert.throws(() => loadServeConfig(["m.gguf"], { maxTokensCap: "0" }, {}), /--max-tokens-cap/);
    assert.throws(() => loadServeConfig(["m.gguf"], { shutdownTimeout: "soon" }, {}), /--shutdown-timeout/);
  });
});

describe("--config file", () => {
  const known = new Set([
    "host",
    "port",
    "maxNumSeqs",
    "maxModelLen",
    "servedModelName",
    "apiKey",
    "rateLimit",
    "prefixCaching",
    "logRequests",
    "config",
  ]);

  it("reads flags and per-model settings; command-line flags win over the file", () => {
    const template = join(dir, "t.jinja");
    writeFileSync(template, "{{ messages[0].content }}");
    const path = configFile(`
host: 0.0.0.0
port: 9999
max_num_seqs: 3
api-key: [a, b]
rate-limit: 10/s
no-prefix-caching: true
models:
  - model: one.gguf
    served-model-name: [first, alias]
    max-model-len: 256
    max-num-seqs: 1
  - model: two.gguf
    chat-template: ${template}
`);
    const config = loadServeConfig(
      [],
      { config: path, port: "0", host: "127.0.0.1", maxNumSeqs: "4" },
      {},
      { knownFlags: known, defaultedFlags: new Set(["host", "maxNumSeqs"]) },
    );
    assert.equal(config.port, 0, "a flag given on the command line wins");
    assert.equal(config.host, "0.0.0.0", "a flag left at its default takes the file's value");
    assert.equal(config.maxNumSeqs, 3);
    assert.deepEqual(config.apiKeys, ["a", "b"]);
    assert.deepEqual(config.rateLimit, { requests: 10, windowSeconds: 1 });
    assert.equal(config.prefixCaching, false);
    assert.equal(config.models.length, 2);
    assert.deepEqual(config.models[0]?.servedModelNames, ["first", "alias"]);
    assert.equal(config.models[0]?.maxModelLen, 256);
    assert.equal(config.models[0]?.maxNumSeqs, 1);
    assert.equal(config.models[1]?.source, "two.gguf");
    assert.equal(config.models[1]?.chatTemplate, "{{ messages[0].content }}");
  });

  it("lets MODEL arguments replace the file's models", () => {
    const path = configFile("model: from-file.gguf\nport: 1234\n");
    const config = loadServeConfig(["cli.gguf"], { config: path }, {}, { knownFlags: known });
    assert.deepEqual(
      config.models.map((model) => model.source),
      ["cli.gguf"],
    );
    assert.equal(config.port, 1234);
  });

  it("refuses unknown keys, wrong shapes, bad YAML and a missing model, naming the file", () => {
    const cases: [string, RegExp][] = [
      ["model: m.gguf\nmax-num-seq: 2\n", /unknown key 'max-num-seq'/],
      ["model: m.gguf\nport: [1, 2]\n", /'port' takes one value/],
      ["model: m.gguf\nhost: {a: 1}\n", /'host' must be a string or a number/],
      ["models:\n  - model: m.gguf\n    threads: 2\n", /unknown key 'threads'/],
      ["models:\n  - served-model-name: x\n", /has no 'model'/],
      ["port: 8000\n", /No model given/],
      ["model: [unclosed\n", /not valid YAML/],
      ["- just\n- a list\n", /must be a mapping/],
    ];
    for (const [text, message] of cases) {
      const path = configFile(text);
      assert.throws(
        () => loadServeConfig([], { config: path }, {}, { knownFlags: known }),
        (error: unknown) => error instanceof ConfigError && message.test(error.message),
        text,
      );
    }
    assert.throws(
      () => loadServeConfig([], { config: join(dir, "missing.yaml") }, {}),
      /Cannot read the config file/,
    );
  });
});
