# lmserve: OpenAI-compatible inference server for GGUF models.
#   docker build -t lmserve:0.1.0 .
#   docker run --rm -p 8000:8000 -v /path/to/models:/models:ro lmserve:0.1.0 /models/model.gguf
# See docs/deployment.md.

# --- build: install every dependency, build the native engine, compile the server (dist/) and build the web UI,
#     then drop the dev dependencies (TypeScript, tsx, Vite: none runs at run time) ---
FROM node:20-bookworm-slim AS build
# The native engine (native/) compiles with g++ against the llama.cpp headers in node-llama-cpp's git bundle;
# cmake builds ggml's CPU backend from the same sources for the build machine's instruction set (on a
# processor without it the engine takes node-llama-cpp's prebuilt CPU variants; docs/deployment.md).
RUN apt-get update && apt-get install -y --no-install-recommends g++ git cmake make ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
RUN node scripts/build-native.mjs && rm -rf native/build/ggml-cpu/cmake && mkdir -p native/build/ggml-cpu \
    && npm run build && npm prune --omit=dev \
    && platform="$(node -p 'process.platform + "-" + process.arch')" \
    && find node_modules/@node-llama-cpp -mindepth 1 -maxdepth 1 -type d ! -name "${platform}*" -exec rm -rf {} +
# (above: only this platform's node-llama-cpp prebuilt libraries reach the runtime layer, ~680 MB less)

# --- runtime: the server only, as the unprivileged `node` user (uid 1000) ---
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    LMSERVE_LOG_LEVEL=info
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json /app/package-lock.json ./
COPY --from=build --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/bin ./bin
COPY --from=build --chown=root:root /app/scripts/healthcheck.mjs ./scripts/healthcheck.mjs
# The server compiled to plain JavaScript (`npm run build:server`): no TypeScript loader at run time.
COPY --from=build --chown=root:root /app/dist ./dist
# The compiled addon and where it finds node-llama-cpp's prebuilt libraries (an rpath into node_modules).
COPY --from=build --chown=root:root /app/native/build/lmserve_engine.node /app/native/build/paths.json ./native/build/
# ggml's CPU backend built for the build machine (absent where it could not be built: then the prebuilt one).
COPY --from=build --chown=root:root /app/native/build/ggml-cpu ./native/build/ggml-cpu
COPY --from=build --chown=root:root /app/ui/dist ./ui/dist
# Models are mounted here (read-only is enough); nothing in the image is writable by the server.
RUN mkdir -p /models
VOLUME ["/models"]
USER node
EXPOSE 8000
# Readiness is 503 while models load and while draining for shutdown.
# It follows the port: the server's own --port argument, else LMSERVE_PORT, else 8000 (scripts/healthcheck.mjs).
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s \
  CMD ["node", "scripts/healthcheck.mjs"]
# SIGTERM drains in-flight requests for --shutdown-timeout seconds (default 30), then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "bin/lmserve.js", "serve"]
CMD ["/models/model.gguf", "--host", "0.0.0.0", "--port", "8000"]
