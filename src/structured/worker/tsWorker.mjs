// The entry of worker threads that run TypeScript modules (the constraint compiler's, the schema
// benchmark's): tsx's module hooks are not inherited by worker threads, so this plain-JavaScript file
// registers them in the worker, then imports the module named by `workerData.module` (a file URL).
import { workerData } from "node:worker_threads";
import { register } from "tsx/esm/api";

register();
await import(workerData.module);
