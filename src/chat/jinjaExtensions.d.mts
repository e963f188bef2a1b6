/**
 * Installs into `@huggingface/jinja` what real chat templates use and the library lacks (see the header
 * of `jinjaExtensions.mjs` for the list and each addition's source); a second call does nothing.
 */
export function installJinjaExtensions(): void;
