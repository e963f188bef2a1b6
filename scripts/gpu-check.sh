#!/usr/bin/env bash
# GPU check (issue "Own the decode loop"): on a machine with an NVIDIA GPU, serves the synthetic
# Qwen2.5-0.5B Q8_0 model fully offloaded (--device cuda) and prints output tok/s at concurrency 1 and 8
# and the GPU memory the server uses. Needs node-llama-cpp's CUDA build (installed by npm ci) and the
# host's CUDA runtime and cuBLAS. Usage: scripts/gpu-check.sh [MODEL.gguf]   (env: PORT, TOKENS, ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-bench/models/qwen2.5-0.5b-synthetic-q8_0.gguf}
PORT=${PORT:-8190}
TOKENS=${TOKENS:-128}
ROUNDS=${ROUNDS:-4}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi not found)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ ! -f "$MODEL" ]; then
  echo "gpu-check: writing the synthetic model $MODEL" >&2
  npx tsx bench/make-model.ts --quiet --out "$MODEL"
fi

LOG=$(mktemp)
node bin/lmserve.js serve "$MODEL" --device cuda --port "$PORT" --max-num-seqs 8 --max-model-len 1024 \
  --no-ui --log-level info >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$PORT/v1/health/ready" >/dev/null; then break; fi
  if ! kill -0 $PID 2>/dev/null; then cat "$LOG" >&2; exit 1; fi
  sleep 0.5
done
grep '"model loaded"' "$LOG" | head -1

PORT=$PORT TOKENS=$TOKENS ROUNDS=$ROUNDS node --input-type=module -e '
const url = `http://127.0.0.1:${process.env.PORT}/v1/completions`;
const tokens = Number(process.env.TOKENS);
const rounds = Number(process.env.ROUNDS);
const model = (await (await fetch(url.replace("/completions", "/models"))).json()).data[0].id;
async function one(seed) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "Once upon a time", max_tokens: tokens, ignore_eos: true,
      temperature: 0.7, top_k: 40, top_p: 0.95, min_p: 0.05, seed }),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(JSON.stringify(json));
  return json.usage.completion_tokens;
}
await one(0); // warm-up
for (const concurrency of [1, 8]) {
  const started = performance.now();
  let total = 0;
  for (let round = 0; round < rounds; round++) {
    const counts = await Promise.all(Array.from({ length: concurrency }, (_, i) => one(round * 100 + i)));
    total += counts.reduce((a, b) => a + b, 0);
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`concurrency ${concurrency}: ${(total / seconds).toFixed(1)} tok/s (${total} tokens in ${seconds.toFixed(1)} s)`);
}
'
echo "GPU memory used by the server (MiB):"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | awk -F', ' -v pid=$PID '$1==pid {print $2}'
nvidia-smi --query-gpu=memory.used --format=csv,noheader
