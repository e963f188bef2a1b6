/**
 * The model-cache commands of the `lmserve` command line: `lmserve pull MODEL` downloads a model
 * without serving it, `lmserve list` shows the models in the download folder (as `ollama pull` /
 * `ollama list` do).
 */
import type { Command } from "commander";
import { loadModelSourceSettings } from "../config/serveConfig.ts";
import { formatModelList, listModels, pullModel } from "../models/index.ts";

/** `--download-dir` as every model command declares it. */
export const downloadDirFlag = "--download-dir <dir>";
/** Help text of {@link downloadDirFlag}. */
export const downloadDirHelp =
  "folder of downloaded models (default: $XDG_CACHE_HOME/lmserve/models or ~/.cache/lmserve/models)";

/**
 * Adds `pull` and `list` to `program`.
 * - `pull MODEL [--download-dir DIR]`: progress and a one-line summary on stderr, exit 0.
 * - `list [--download-dir DIR]`: the table of `formatModelList` on stdout.
 * @param fail Reports an error thrown by a command and exits (the CLI's one error path).
 */
export function registerModelCommands(program: Command, fail: (error: unknown) => never): void {
  program
    .command("pull")
    .description(
      "download a model (hf:owner/repo/file.gguf, hf:owner/repo:QUANT or a URL) without serving it",
    )
    .argument(
      "<model>",
      "model source: hf:owner/repo/file.gguf, hf:owner/repo:QUANT, an https:// URL or a path",
    )
    .option(downloadDirFlag, downloadDirHelp)
    .action(async (model: string, flags: { downloadDir?: string }) => {
      try {
        const settings = loadModelSourceSettings(flags, process.env);
        await pullModel(model, { ...settings, stream: process.stderr });
      } catch (error) {
        fail(error);
      }
    });

  program
    .command("list")
    .description("list the downloaded models with their sizes")
    .option(downloadDirFlag, downloadDirHelp)
    .action(async (flags: { downloadDir?: string }) => {
      try {
        const { downloadDir } = loadModelSourceSettings(flags, process.env);
        process.stdout.write(formatModelList(await listModels(downloadDir), downloadDir));
      } catch (error) {
        fail(error);
      }
    });
}
