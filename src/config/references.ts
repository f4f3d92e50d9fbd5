/**
 * `${VAR}` references the loader found unset. Such a field is dropped (so an optional
 * `${OPENAI_API_KEY}` means "no key" and defaults apply), but whatever then fails for want of it
 * names the variable and the field: the loaded config carries the list under a symbol key, which
 * spreads (`{ ...config, agent }`) keep and JSON output and `Object.keys` do not show.
 */

export const unsetReferences: unique symbol = Symbol("unsetReferences");

/** One `${VAR}` that was not set, and the config field it was to fill (`providers.deepseek.apiKey`). */
export interface UnsetReference {
  variable: string;
  path: string;
}

/** A config as loaded: with the `${VAR}` references that were not set, if any. */
export interface WithUnsetReferences {
  readonly [unsetReferences]?: readonly UnsetReference[];
}

/** The unset references that fed `path` or a field inside it. */
export function unsetReferencesAt(config: WithUnsetReferences, path: string): UnsetReference[] {
  return (config[unsetReferences] ?? []).filter((reference) => reference.path === path || reference.path.startsWith(`${path}.`) || reference.path.startsWith(`${path}[`));
}

/** `providers.deepseek.apiKey comes from ${DEEPSEEK_API_KEY}, which is not set`, or undefined when no unset reference fed it. */
export function describeUnsetReference(config: WithUnsetReferences, path: string): string | undefined {
  const found = unsetReferencesAt(config, path);
  if (found.length === 0) return undefined;
  const variables = [...new Set(found.map((reference) => reference.variable))];
  const named = variables.map((variable) => `\${${variable}}`).join(", ");
  return `${found[0]!.path} comes from ${named}, which ${variables.length === 1 ? "is" : "are"} not set`;
}
