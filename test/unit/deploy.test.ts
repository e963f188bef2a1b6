import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { ServerMetrics } from "../../src/server/metrics.ts";

const DEPLOY = join(import.meta.dirname, "../../deploy/kubernetes");
const ROUTER = join(DEPLOY, "llm-d-router");

type Manifest = { kind?: string; metadata?: { name?: string }; spec?: Record<string, unknown> };

/** Every Kubernetes object of the YAML files directly in deploy/kubernetes/. */
function manifests(): Manifest[] {
  return readdirSync(DEPLOY)
    .filter((name) => name.endsWith(".yaml") && name !== "kustomization.yaml")
    .flatMap((name) =>
      parseAllDocuments(readFileSync(join(DEPLOY, name), "utf8")).map((document) => {
        assert.equal(document.errors.length, 0, `${name}: ${document.errors[0]?.message}`);
        return document.toJS() as Manifest;
      }),
    );
}

type RouterValues = {
  router: {
    modelServers: { matchLabels: Record<string, string>; type: string; targetPorts: { number: number }[] };
    epp: { pluginsConfigFile: string; pluginsCustomConfig: Record<string, string> };
  };
};

/** The two llm-d-router charts' values files and the EndpointPickerConfig each carries. */
function routerValues(): { name: string; values: RouterValues; picker: Record<string, unknown> }[] {
  return ["gateway-values.yaml", "standalone-values.yaml"].map((name) => {
    const values = parseYaml(readFileSync(join(ROUTER, name), "utf8")) as RouterValues;
    const { pluginsConfigFile, pluginsCustomConfig } = values.router.epp;
    const text = pluginsCustomConfig[pluginsConfigFile];
    assert.ok(text, `${name}: router.epp.pluginsCustomConfig has no ${pluginsConfigFile}`);
    return { name, values, picker: parseYaml(text) as Record<string, unknown> };
  });
}

describe("deploy/: the Kubernetes manifests and the inference gateway's chart values agree", () => {
  const objects = manifests();
  const deployment = objects.find((object) => object.kind === "Deployment");
  const template = deployment?.spec?.template as {
    metadata: { labels: Record<string, string> };
    spec: { containers: { ports: { containerPort: number }[] }[] };
  };
  const podLabels = template.metadata.labels;
  const containerPort = template.spec.containers[0]?.ports[0]?.containerPort;

  it("the InferencePool example selects the Deployment's pods on their container port", () => {
    const pool = objects.find((object) => object.kind === "InferencePool");
    const spec = pool?.spec as {
      selector: { matchLabels: Record<string, string> };
      targetPorts: { number: number }[];
    };
    for (const [key, value] of Object.entries(spec.selector.matchLabels)) assert.equal(podLabels[key], value);
    assert.deepEqual(
      spec.targetPorts.map((port) => port.number),
      [containerPort],
    );
  });

  it("both llm-d-router values files select those pods, as vLLM-type model servers", () => {
    for (const { name, values } of routerValues()) {
      const { matchLabels, type, targetPorts } = values.router.modelServers;
      for (const [key, value] of Object.entries(matchLabels)) assert.equal(podLabels[key], value, name);
      assert.equal(type, "vllm", name);
      assert.deepEqual(
        targetPorts.map((port) => port.number),
        [containerPort],
        name,
      );
    }
  });

  it("each endpoint picker config declares every plugin its profile uses, LoRA affinity among them", () => {
    for (const { name, picker } of routerValues()) {
      const plugins = picker.plugins as { type: string; name?: string }[];
      const declared = new Set(plugins.map((plugin) => plugin.name ?? plugin.type));
      const profiles = picker.schedulingProfiles as { plugins: { pluginRef: string }[] }[];
      assert.ok(profiles.length > 0, name);
      for (const profile of profiles) {
        for (const { pluginRef } of profile.plugins)
          assert.ok(declared.has(pluginRef), `${name}: ${pluginRef}`);
      }
      assert.ok(declared.has("lora-affinity-scorer"), name);
      assert.ok(declared.has("metrics-data-source") && declared.has("core-metrics-extractor"), name);
    }
  });

  it("lmserve exports the metrics the picker's scorers read (llm-d-router's plugin metric protocol)", async () => {
    const metrics = new ServerMetrics();
    // The LoRA gauge exists once adapters are served (--lora, --enable-lora, or a run-time load).
    metrics.enableLora();
    const text = await metrics.registry.metrics();
    for (const name of [
      "vllm:num_requests_waiting",
      "vllm:num_requests_running",
      "vllm:kv_cache_usage_perc",
      "vllm:cache_config_info",
      "vllm:lora_requests_info",
    ]) {
      assert.ok(text.includes(`# TYPE ${name} gauge`), name);
    }
  });
});
