/**
 * Structural verification of a local GGUF file, used on every download before it enters the cache and on
 * cached files that have no (or a stale) sidecar record. Three checks, cheapest first:
 * 1. the first four bytes are the GGUF magic `"GGUF"` (ggml's `GGUF_MAGIC`);
 * 2. node-llama-cpp's `readGgufFileInfo` parses the header, metadata and tensor infos (through
 *    `engine/ggufFiles.ts`, the one place outside the engine proper that reads GGUF files);
 * 3. every tensor's data lies inside the file: `fileOffset + size <= fileSize`, with the size computed from
 *    the dimensions for the common ggml types (block sizes from ggml's `ggml_type_traits`), and at least
 *    `fileOffset < fileSize` for the others. This catches a truncated file, which parses fine.
 * Byte-level integrity of the transfer itself is ipull's (Content-Length / Content-Range checks per chunk);
 * Hugging Face's SHA-256 is not exposed through node-llama-cpp's downloader, so it is not compared.
 */
import { open, stat } from "node:fs/promises";
import { type GgufLayout, readLocalGgufLayout } from "../engine/ggufFiles.ts";

/** The outcome of {@link verifyGgufFile}. */
export type GgufVerification =
  | {
      ok: true;
      /** File size in bytes. */
      sizeBytes: number;
      /** `general.architecture`, when present. */
      architecture?: string;
    }
  | {
      ok: false;
      /** Why the file was refused, a lower-case phrase, e.g. `the first bytes are "<htm", not "GGUF"`. */
      reason: string;
    };

/** Reads up to `length` bytes from the start of a file. */
async function readHead(path: string, length: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * True when the file starts with the GGUF magic bytes. Cheap (reads 4 bytes).
 * @throws The fs error when the file cannot be opened.
 */
export async function hasGgufMagic(path: string): Promise<boolean> {
  const head = await readHead(path, 4);
  return head.toString("latin1") === "GGUF";
}

/** Prints the first bytes of a non-GGUF file readably: `"<htm"`, or hex when not printable. */
function describeHead(head: Buffer): string {
  const text = head.toString("latin1");
  return /^[\x20-\x7e]*$/.test(text) ? JSON.stringify(text) : `0x${head.toString("hex")}`;
}

/**
 * Verifies that `path` is a complete, parsable GGUF file (see the module comment for the checks).
 * Never throws for a bad file; returns `{ok: false, reason}` instead.
 * @param path Local file path.
 * @param options.signal Aborts the header parse.
 * @throws Only when `signal` is aborted (its reason).
 */
export async function verifyGgufFile(
  path: string,
  options: { signal?: AbortSignal } = {},
): Promise<GgufVerification> {
  let sizeBytes: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) return { ok: false, reason: "it is not a regular file" };
    sizeBytes = info.size;
    const head = await readHead(path, 4);
    if (head.length < 4) return { ok: false, reason: `it is only ${sizeBytes} bytes long` };
    if (head.toString("latin1") !== "GGUF")
      return { ok: false, reason: `its first bytes are ${describeHead(head)}, not "GGUF"` };
  } catch (error) {
    return {
      ok: false,
      reason: `it cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    };
  }

  let layout: GgufLayout;
  try {
    layout = await readLocalGgufLayout(path, options.signal ? { signal: options.signal } : {});
  } catch (error) {
    if (options.signal?.aborted) throw options.signal.reason;
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, reason: `its GGUF header cannot be parsed (${message.split("\n")[0]})` };
  }

  for (const tensor of layout.tensors) {
    if (tensor.elements === 0) continue;
    const bytes = tensor.dataBytes ?? 1;
    if (tensor.fileOffset + bytes > sizeBytes)
      return {
        ok: false,
        reason: `it is truncated (tensor "${tensor.name}" ends at byte ${tensor.fileOffset + bytes} but the file has ${sizeBytes})`,
      };
  }

  return {
    ok: true,
    sizeBytes,
    ...(layout.architecture !== undefined ? { architecture: layout.architecture } : {}),
  };
}
