/**
 * The production-operations flags of `lmserve serve` (authentication, limits, timeouts, CORS, request
 * logging, graceful shutdown, config file), added to the command by `main.ts`. Names follow `vllm serve`
 * where it has the flag (`--api-key`, `--allowed-origins`, `--config`, `--timeout-keep-alive`).
 */
import type { Command } from "commander";
import type { ServeFlagsInfo } from "../config/serveConfig.ts";

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** Adds the operational flags to the `serve` command (see `config/operations.ts` for their meaning). */
export function addOperationsOptions(serve: Command): void {
  serve
    .option(
      "--config <file>",
      "YAML file of flags and models (keys are the flag names); flags given here win",
    )
    .option(
      "--api-key <key>",
      "require 'Authorization: Bearer KEY' on /v1/* (repeatable; also LMSERVE_API_KEY)",
      collect,
    )
    .option("--protect-metrics", "require the API key on /metrics too (health endpoints stay open)")
    .option("--rate-limit <rate>", "requests per API key (per client address without keys), e.g. 60/min, 5/s")
    .option(
      "--max-body-size <size>",
      "largest request body, e.g. 1048576, 512kb, 8mb (default: 8mb); larger: 413",
    )
    .option("--receive-timeout <seconds>", "time to receive a request's headers and body (default: 60)")
    .option("--timeout-keep-alive <seconds>", "close keep-alive connections idle this long (default: 5)")
    .option("--max-tokens-cap <n>", "largest max_tokens a request may ask for; more: 400")
    .option("--max-n <n>", "largest n (choices) a request may ask for; more: 400")
    .option(
      "--allowed-origins <origins>",
      "CORS origins allowed to call the API, e.g. https://app.example.com or * (repeatable; default: none)",
      collect,
    )
    .option("--log-requests", "log prompts and outputs (never logged otherwise)")
    .option(
      "--shutdown-timeout <seconds>",
      "on SIGTERM/SIGINT, seconds in-flight requests get to finish (default: 30)",
    );
}

/**
 * What {@link loadServeConfig} needs to know about the parsed flags to merge a config file under them:
 * every option attribute, and which ones only hold the parser's default.
 */
export function serveFlagsInfo(serve: Command, flags: object): ServeFlagsInfo {
  return {
    knownFlags: new Set(serve.options.map((option) => option.attributeName())),
    defaultedFlags: new Set(
      Object.keys(flags).filter((key) => serve.getOptionValueSource(key) === "default"),
    ),
  };
}
