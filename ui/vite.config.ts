// Builds the web UI (`npm run build`) into ui/dist, which lmserve serves at `/` (src/server/ui.ts).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  // Relative asset URLs: the UI also works behind a proxy that mounts lmserve under a path.
  base: "./",
  logLevel: "warn",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
