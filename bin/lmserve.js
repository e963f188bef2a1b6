#!/usr/bin/env node
// Entry point of the `lmserve` command: runs the TypeScript sources through tsx's ESM loader.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
