/**
 * The fetch HTTP MCP transports use, behind web_fetch's address wall (../net-guard.ts): a server
 * URL that names a local, private or cloud-metadata host, in any spelling, is refused before
 * anything is dialled, unless its host is listed in `tools.mcpAllowedHosts`.
 *
 * A host name is judged where the socket is made: the connection's `lookup` resolves it, judges
 * EVERY address it got and hands the socket only those, so a DNS answer that changes between a
 * check and the connect (rebinding) changes nothing. Redirects are never followed to another
 * host by fetch itself (`redirect: "manual"`); the SDK follows same-origin ones through this
 * fetch again, where they meet the same checks.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { Agent, fetch as undiciFetch } from "undici";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { errorMessage } from "../../errors.js";
import { addressRefusal, hostnameRefusal, parseTarget } from "../net-guard.js";
import type { ResolvedAddress, Resolver } from "../web-fetch.js";

/** The address guard said no: not worth retrying until the config changes. */
export class AddressRefusedError extends Error {
  override name = "AddressRefusedError";
}

export interface GuardedFetchOptions {
  /** Hosts (as written in URLs, lower case, IPv6 without brackets) exempt from the checks. */
  allowedHosts: readonly string[];
  /** Every address of a host name; default `dns.promises.lookup(hostname, { all: true })`. Injectable for tests. */
  resolve?: Resolver;
}

export interface GuardedFetch {
  fetch: FetchLike;
  /** Closes the pooled connections. */
  close(): Promise<void>;
}

const allowHint = "list its host in tools.mcpAllowedHosts to allow it";

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const resolve: Resolver = options.resolve ?? ((hostname) => dnsLookup(hostname, { all: true, verbatim: true }));
  const allowed = new Set(options.allowedHosts.map(normalizeHost));
  const isAllowed = (hostname: string) => allowed.has(normalizeHost(hostname));

  const lookup = ((hostname: string, lookupOptions: { all?: boolean }, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    resolve(hostname).then(
      (addresses) => {
        if (addresses.length === 0) return callback(Object.assign(new Error(`the host "${hostname}" has no addresses`), { code: "ENOTFOUND" }), []);
        if (!isAllowed(hostname)) {
          for (const { address } of addresses) {
            const refusal = addressRefusal(address);
            if (refusal) return callback(new AddressRefusedError(`"${hostname}" resolves to ${address}, ${refusal}; ${allowHint}`), []);
          }
        }
        const first = addresses[0] as ResolvedAddress;
        if (lookupOptions.all) callback(null, addresses.map(({ address, family }) => ({ address, family })));
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(errorMessage(error)), []),
    );
  }) as unknown as LookupFunction;

  const agent = new Agent({ connect: { lookup } });

  const fetch: FetchLike = async (input, init) => {
    const url = typeof input === "string" ? input : input.href;
    const refusal = urlRefusal(url, isAllowed);
    if (refusal) throw new AddressRefusedError(`refused to connect to ${redactedUrl(url)}: ${refusal}`);
    const response = await undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), redirect: "manual", dispatcher: agent });
    return response as unknown as Response;
  };
  return { fetch, close: () => agent.close() };
}

/** Why this URL may not be fetched before any DNS, or undefined. Names are judged again by `lookup`. */
export function urlRefusal(url: string, isAllowed: (hostname: string) => boolean): string | undefined {
  const checked = parseTarget(url);
  if (!checked.ok) return checked.reason;
  const { hostname, ipFamily } = checked.target;
  if (isAllowed(hostname)) return undefined;
  const refusal = ipFamily === 0 ? hostnameRefusal(hostname) : addressRefusal(hostname);
  return refusal && `${ipFamily === 0 ? refusal : `${hostname} is ${refusal}`}; ${allowHint}`;
}

function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "");
}

/** The URL without its query and credentials, for messages. */
function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "the server's URL";
  }
}

/** The guard's refusal in `error` or its causes, if that is what it is. */
export function addressRefusalIn(error: unknown): AddressRefusedError | undefined {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    if (current instanceof AddressRefusedError) return current;
  }
  return undefined;
}
