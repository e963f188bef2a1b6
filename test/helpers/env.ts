/**
 * Remembers the current values of environment variables `names`; the returned function puts them back
 * (deleting those that were unset), for tests that point child processes elsewhere through `process.env`.
 */
export function saveEnv(names: readonly string[]): () => void {
  const saved = names.map((name) => [name, process.env[name]] as const);
  return () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}
