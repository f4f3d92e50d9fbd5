/**
 * Keeps secrets out of what CountBot prints: `countbot config` shows a masked copy of the config,
 * and logs pass through {@link redactText}.
 */

/** Fields whose value is a secret wherever they appear (compared without case). */
const secretFields = new Set(["apikey", "apikeys", "token", "appsecret", "secret", "password", "braveapikey", "encryptkey", "verificationtoken", "bottoken", "apptoken", "signingsecret"]);

/** HTTP headers (in `providers.*.headers`, `tools.mcpServers.*.headers`) and MCP servers' variables (`env`) that carry credentials. */
const secretHeader = /auth|key|token|secret|cookie|password|credential/i;

/** Secrets shorter than this are masked whole: showing their last characters would give away too much. */
const shortestShownSecret = 12;

/** Secrets shorter than this are not searched for in text: they would match ordinary words and numbers. */
const shortestRedactedSecret = 4;

/** Whether a field of this name holds a secret; `parentKey` is the name of the object holding it. */
export function isSecretField(key: PropertyKey, parentKey?: PropertyKey): boolean {
  if (typeof key !== "string") return false;
  return secretFields.has(key.toLowerCase()) || ((parentKey === "headers" || parentKey === "env") && secretHeader.test(key));
}

/** `"****"` and the last four characters, or only `"****"` for a short secret. */
export function maskSecret(secret: string): string {
  return secret.length >= shortestShownSecret ? `****${secret.slice(-4)}` : "****";
}

/**
 * A deep copy of `config` with every secret masked: fields named apiKey, token, appSecret, secret,
 * password or braveApiKey and the items of lists named apiKeys; credential headers; and the
 * password in URLs such as `redis://:pw@host`.
 */
export function maskSecrets<T>(config: T): T {
  return mapSecrets(config, maskSecret) as T;
}

/** The secret values in `config`, for {@link redactText}. */
export function collectSecrets(config: unknown): string[] {
  const secrets: string[] = [];
  mapSecrets(config, (secret) => {
    secrets.push(secret);
    return secret;
  });
  return [...new Set(secrets)];
}

/** `text` with every occurrence of each secret (also URL-encoded) replaced by its mask. */
export function redactText(text: string, secrets: readonly string[]): string {
  return createRedactor(secrets)(text);
}

/** {@link redactText} with its pattern built once, for a logger that redacts every line. */
export function createRedactor(secrets: readonly string[]): (text: string) => string {
  const masks = new Map<string, string>();
  for (const secret of secrets) {
    if (secret.length < shortestRedactedSecret) continue;
    // URLs carry secrets encoded (`redis://:p%40ss@host`), messages may quote them decoded.
    for (const form of [secret, encodeURIComponent(secret), decodeOrSame(secret)]) {
      if (form.length >= shortestRedactedSecret) masks.set(form, maskSecret(secret));
    }
  }
  if (masks.size === 0) return (text) => text;
  // Longest first, so a secret that contains another is replaced whole.
  const pattern = new RegExp(
    [...masks.keys()]
      .sort((left, right) => right.length - left.length)
      .map((secret) => secret.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("|"),
    "g",
  );
  return (text) => text.replace(pattern, (found) => masks.get(found) ?? "****");
}

function decodeOrSame(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Copies `value`, passing each secret through `replace`. */
function mapSecrets(value: unknown, replace: (secret: string) => string, key?: string, parentKey?: string): unknown {
  if (typeof value === "string") {
    return key !== undefined && isSecretField(key, parentKey) ? replace(value) : replaceUrlPassword(value, replace);
  }
  // A list under a secret's name (`apiKeys`) is a list of secrets.
  if (Array.isArray(value)) return value.map((item) => mapSecrets(item, replace, key !== undefined && isSecretField(key, parentKey) ? key : undefined, key));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, mapSecrets(item, replace, name, key)]));
  }
  return value;
}

/**
 * Replaces the password of a URL with credentials (`redis://:pw@host`, `redis://user:pw@host`), or
 * the whole user part when it has no password (`https://token@host`). Works on the text rather than
 * `new URL`, so the rest of the URL is shown exactly as written.
 */
function replaceUrlPassword(text: string, replace: (secret: string) => string): string {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(text);
  if (!scheme) return text;
  const start = scheme[0].length;
  const authorityEnd = text.slice(start).search(/[/?#]/);
  const authority = authorityEnd === -1 ? text.slice(start) : text.slice(start, start + authorityEnd);
  const at = authority.lastIndexOf("@");
  if (at <= 0) return text;
  const userInfo = authority.slice(0, at);
  const colon = userInfo.indexOf(":");
  const [user, secret] = colon === -1 ? ["", userInfo] : [userInfo.slice(0, colon + 1), userInfo.slice(colon + 1)];
  if (secret === "") return text;
  return `${text.slice(0, start)}${user}${replace(secret)}${text.slice(start + at)}`;
}
