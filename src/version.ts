import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { projectRoot } from "./paths.ts";

/** The server's version: `version` of the project's package.json (`lmserve --version`, `/v1/version`). */
export const serverVersion: string = (
  JSON.parse(readFileSync(resolve(projectRoot, "package.json"), "utf8")) as { version: string }
).version;
