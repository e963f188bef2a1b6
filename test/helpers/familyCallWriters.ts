/**
 * Test helper: how each tool-call family of `src/serving/guided/toolGrammars.ts` writes calls (its template's /
 * documented form), and the chat template each family is detected from (llama.cpp's models/templates).
 */

/** A call as the writers take it: the function's name and its arguments. */
export type Call = { name: string; args: Record<string, unknown> };

/** How each family writes `calls` (its template's / documented form), and the families' templates. */
export const FAMILIES: Record<string, { file: string; write: (calls: Call[]) => string }> = {
  qwen3_coder: {
    file: "Qwen3-Coder.jinja",
    write: (calls) =>
      calls
        .map(
          (call) =>
            `<tool_call>\n<function=${call.name}>\n${Object.entries(call.args)
              .map(
                ([k, v]) =>
                  `<parameter=${k}>\n${typeof v === "string" ? v : JSON.stringify(v)}\n</parameter>\n`,
              )
              .join("")}</function>\n</tool_call>`,
        )
        .join("\n"),
  },
  glm45: {
    file: "GLM-4.6.jinja",
    write: (calls) =>
      calls
        .map(
          (call) =>
            `<tool_call>${call.name}\n${Object.entries(call.args)
              .map(
                ([k, v]) =>
                  `<arg_key>${k}</arg_key>\n<arg_value>${typeof v === "string" ? v : JSON.stringify(v)}</arg_value>\n`,
              )
              .join("")}</tool_call>`,
        )
        .join("\n"),
  },
  glm47: {
    file: "GLM-4.7-Flash.jinja",
    write: (calls) =>
      calls
        .map(
          (call) =>
            `<tool_call>${call.name}${Object.entries(call.args)
              .map(
                ([k, v]) =>
                  `<arg_key>${k}</arg_key><arg_value>${typeof v === "string" ? v : JSON.stringify(v)}</arg_value>`,
              )
              .join("")}</tool_call>`,
        )
        .join("\n"),
  },
  minimax_m2: {
    file: "MiniMax-M2.jinja",
    write: (calls) =>
      `<minimax:tool_call>\n${calls
        .map(
          (call) =>
            `<invoke name="${call.name}">\n${Object.entries(call.args)
              .map(
                ([k, v]) =>
                  `<parameter name="${k}">${typeof v === "string" ? v : JSON.stringify(v)}</parameter>\n`,
              )
              .join("")}</invoke>\n`,
        )
        .join("")}</minimax:tool_call>`,
  },
  minicpm5: {
    file: "openbmb-MiniCPM5-1B.jinja",
    write: (calls) =>
      calls
        .map(
          (call) =>
            `<function name="${call.name}">${Object.entries(call.args)
              .map(([k, v]) => `<param name="${k}">${typeof v === "string" ? v : JSON.stringify(v)}</param>`)
              .join("")}</function>`,
        )
        .join("\n"),
  },
  mistral: {
    file: "unsloth-mistral-Devstral-Small-2507.jinja",
    write: (calls) =>
      calls.map((call) => `[TOOL_CALLS]${call.name}[ARGS]${JSON.stringify(call.args)}`).join(""),
  },
  deepseek_v3: {
    file: "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    write: (calls) =>
      `<｜tool▁calls▁begin｜>${calls
        .map(
          (call) =>
            `<｜tool▁call▁begin｜>function<｜tool▁sep｜>${call.name}\n\`\`\`json\n${JSON.stringify(call.args)}\n\`\`\`<｜tool▁call▁end｜>`,
        )
        .join("")}<｜tool▁calls▁end｜>`,
  },
  deepseek_v31: {
    file: "deepseek-ai-DeepSeek-V3.1.jinja",
    write: (calls) =>
      `<｜tool▁calls▁begin｜>${calls
        .map(
          (call) =>
            `<｜tool▁call▁begin｜>${call.name}<｜tool▁sep｜>${JSON.stringify(call.args)}<｜tool▁call▁end｜>`,
        )
        .join("")}<｜tool▁calls▁end｜>`,
  },
  kimi_k2: {
    file: "moonshotai-Kimi-K2.jinja",
    write: (calls) =>
      `<|tool_calls_section_begin|>${calls
        .map(
          (call) =>
            `<|tool_call_begin|>functions.${call.name}:0<|tool_call_argument_begin|>${JSON.stringify(call.args)}<|tool_call_end|>`,
        )
        .join("")}<|tool_calls_section_end|>`,
  },
};
