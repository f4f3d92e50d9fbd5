/**
 * The names MCP tools go by with the model: `mcp_<server>_<tool>`, in the alphabet every provider
 * accepts for function names (`[a-zA-Z0-9_-]`, at most 64 characters).
 *
 * A name that is too long keeps its head and ends in `_` and a short hash of the server and tool
 * names, so two long names that share a head still differ. Names that come out the same (`a.b`
 * and `a_b` both become `a_b`) are resolved in one fixed order, by server then tool name: the
 * first keeps the plain name, the others get the hash suffix. The result depends only on the set
 * of tools, never on the order servers answered in.
 */
import { createHash } from "node:crypto";

export const MAX_TOOL_NAME_LENGTH = 64;
const HASH_LENGTH = 8;

export interface McpToolKey {
  server: string;
  tool: string;
}

/** The key of a server's tool in the map {@link assignToolNames} returns. */
export function toolKey(server: string, tool: string): string {
  return `${server}\u0000${tool}`;
}

/** `mcp_<server>_<tool>` with every other character replaced by `_`, uncut. */
export function sanitizedName(server: string, tool: string): string {
  return `mcp_${server}_${tool}`.replace(/[^a-zA-Z0-9_-]/g, "_");
}

/** The model's name for each tool, by {@link toolKey}. Unique and deterministic for a given set. */
export function assignToolNames(tools: readonly McpToolKey[]): Map<string, string> {
  const ordered = [...new Map(tools.map((entry) => [toolKey(entry.server, entry.tool), entry])).values()].sort(
    (left, right) => compare(left.server, right.server) || compare(left.tool, right.tool),
  );
  const names = new Map<string, string>();
  const taken = new Set<string>();
  for (const { server, tool } of ordered) {
    const key = toolKey(server, tool);
    const base = sanitizedName(server, tool);
    let name = base.length <= MAX_TOOL_NAME_LENGTH ? base : withHash(base, key);
    for (let attempt = 1; taken.has(name); attempt += 1) name = withHash(base, attempt === 1 ? key : `${key}\u0000${attempt}`);
    taken.add(name);
    names.set(key, name);
  }
  return names;
}

function withHash(base: string, seed: string): string {
  const hash = createHash("sha256").update(seed).digest("hex").slice(0, HASH_LENGTH);
  return `${base.slice(0, Math.min(base.length, MAX_TOOL_NAME_LENGTH - HASH_LENGTH - 1))}_${hash}`;
}

/** Code-unit order, the same on every machine (no locale). */
function compare(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}
