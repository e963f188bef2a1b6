import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { type Browser, chromium } from "playwright-core";
import { projectRoot } from "../../src/paths.ts";

/** Where Debian's `chromium` package (installed by `.ci/run`) puts the browser. */
const CHROMIUM_CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];

/** The system Chromium's path, or undefined when none is installed (browser tests then skip). */
export function findChromium(): string | undefined {
  return CHROMIUM_CANDIDATES.find((path) => existsSync(path));
}

/** Launches headless Chromium without sandbox, GPU or background network traffic. */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** The built web UI that lmserve serves at `/`. */
export const uiDistDir: string = resolve(projectRoot, "ui/dist");

/**
 * Builds the web UI with Vite (`npm run build`'s command) when `ui/dist` is missing, so a test file run
 * on its own works on a fresh clone; `npm test` builds it before running the tests. The build goes to
 * a temporary folder that is renamed into place, so two test files building at once cannot clash.
 * @throws when the build fails.
 */
export function ensureUiBuilt(): void {
  if (existsSync(resolve(uiDistDir, "index.html"))) return;
  const outDir = mkdtempSync(resolve(projectRoot, "ui/.dist-"));
  chmodSync(outDir, 0o755); // mkdtemp makes it private; ui/dist is an ordinary folder
  try {
    const result = spawnSync(
      process.execPath,
      [
        resolve(projectRoot, "node_modules/vite/bin/vite.js"),
        "build",
        "-c",
        "ui/vite.config.ts",
        "--outDir",
        outDir,
      ],
      { cwd: projectRoot, encoding: "utf8" },
    );
    if (result.status !== 0) throw new Error(`vite build failed: ${result.stderr || result.stdout}`);
    try {
      renameSync(outDir, uiDistDir);
    } catch {
      // Another test process built it first; or a broken ui/dist without index.html is in the way.
      if (existsSync(resolve(uiDistDir, "index.html"))) return;
      rmSync(uiDistDir, { recursive: true, force: true });
      renameSync(outDir, uiDistDir);
    }
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}
