/** Raised for an invalid flag, environment value or config file entry; its message is one line for the user. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}
