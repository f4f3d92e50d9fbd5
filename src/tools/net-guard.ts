/**
 * The network wall of the web tools: which URLs may be fetched and which addresses may be dialled.
 *
 * Host parsing is left to the WHATWG URL parser, which turns every IPv4 spelling that browsers and
 * inet_aton accept (`0177.0.0.1`, `0x7f.1`, `2130706433`, `127.1`, `%31%32%37.0.0.1`, full-width
 * digits) into a dotted quad and every IPv6 literal into its compressed form; node:net `isIP`
 * then says whether a host is an address at all. Anything numeric that escaped normalization is
 * refused rather than guessed at. Addresses are judged as numbers, never as strings, so no
 * spelling of an address can slip past a prefix match.
 *
 * The address policy is an allowlist in spirit: only globally routable unicast is public.
 */
import { isIP } from "node:net";

/** A URL that passed the scheme, credential and host-form checks. Its addresses still need judging. */
export interface Target {
  url: URL;
  /** The host without IPv6 brackets, as sent in the Host header and TLS server name. */
  hostname: string;
  /** 4 or 6 when the host is an IP literal (the URL parser's canonical form), 0 for a name. */
  ipFamily: 0 | 4 | 6;
}

export type TargetCheck = { ok: true; target: Target } | { ok: false; reason: string };

/**
 * Parses a URL and applies the checks that need no DNS: http or https only, no credentials, and no
 * host that looks numeric but is not a canonical IP address. Host names and addresses are judged
 * separately ({@link hostnameRefusal}, {@link addressRefusal}) so an operator opt-in can skip them.
 */
export function parseTarget(input: string | URL): TargetCheck {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return { ok: false, reason: "it is not a valid absolute URL" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { ok: false, reason: `the scheme ${url.protocol.replace(/:$/, "")} is not allowed (only http and https)` };
  }
  if (url.username !== "" || url.password !== "") {
    return { ok: false, reason: "URLs with credentials (user:password@) are not allowed" };
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (hostname === "") return { ok: false, reason: "the URL has no host" };
  const family = isIP(hostname);
  if (family === 0 && looksNumeric(hostname)) {
    return { ok: false, reason: `the host "${hostname}" looks like an IP address in a form that is not accepted` };
  }
  return { ok: true, target: { url, hostname, ipFamily: family === 4 || family === 6 ? family : 0 } };
}

/** The last label is all digits or 0x-hex: only an IP address parses that way, never a DNS name. */
function looksNumeric(hostname: string): boolean {
  const labels = stripTrailingDots(hostname).split(".");
  const last = labels[labels.length - 1] ?? "";
  return /^(?:0x[0-9a-f]*|[0-9]+)$/i.test(last);
}

function stripTrailingDots(hostname: string): string {
  return hostname.toLowerCase().replace(/\.+$/, "");
}

/** Why a host name is refused before it is resolved, or undefined when it may be resolved. */
export function hostnameRefusal(hostname: string): string | undefined {
  const name = stripTrailingDots(hostname);
  if (name === "localhost" || name.endsWith(".localhost")) return `"${hostname}" is a local host name`;
  if (name === "metadata" || name === "internal" || name.endsWith(".internal")) {
    return `"${hostname}" is a cloud-metadata or internal host name`;
  }
  // mDNS and home networks: names that only ever mean a machine on the local network.
  if (name.endsWith(".local") || name === "home.arpa" || name.endsWith(".home.arpa")) {
    return `"${hostname}" is a local-network host name`;
  }
  return undefined;
}

/** Whether an IP address is globally routable unicast: the only kind the web tools may dial. */
export function isPublicAddress(address: string): boolean {
  return addressRefusal(address) === undefined;
}

/**
 * Why an IP address may not be dialled (e.g. "a loopback address"), or undefined when it is public.
 * Anything that is not a valid IPv4 or IPv6 address is refused too.
 */
export function addressRefusal(address: string): string | undefined {
  // A zone index (fe80::1%eth0) only ever comes with link-local addresses; judge the address part.
  const bare = address.replace(/%.*$/, "");
  const family = isIP(bare);
  if (family === 4) return ipv4Refusal(parseIPv4(bare));
  if (family === 6) return ipv6Refusal(parseIPv6(bare));
  return `"${address}" is not an IP address`;
}

interface Range {
  base: number;
  prefix: number;
  reason: string;
}

function ipv4Range(base: string, prefix: number, reason: string): Range {
  return { base: parseIPv4(base), prefix, reason };
}

/** Most specific first: the first match names the reason. */
const blockedIPv4: Range[] = [
  ipv4Range("0.0.0.0", 32, "the unspecified address"),
  ipv4Range("0.0.0.0", 8, "a 'this network' address"),
  ipv4Range("10.0.0.0", 8, "a private address"),
  ipv4Range("100.64.0.0", 10, "a carrier-grade NAT (shared) address"),
  ipv4Range("127.0.0.0", 8, "a loopback address"),
  ipv4Range("169.254.0.0", 16, "a link-local address (where cloud metadata services live)"),
  ipv4Range("172.16.0.0", 12, "a private address"),
  ipv4Range("192.0.0.0", 24, "an IETF protocol-assignment address"),
  ipv4Range("192.0.2.0", 24, "a documentation address"),
  ipv4Range("192.88.99.0", 24, "a 6to4 relay anycast address"),
  ipv4Range("192.168.0.0", 16, "a private address"),
  ipv4Range("198.18.0.0", 15, "a benchmarking address"),
  ipv4Range("198.51.100.0", 24, "a documentation address"),
  ipv4Range("203.0.113.0", 24, "a documentation address"),
  ipv4Range("224.0.0.0", 4, "a multicast address"),
  ipv4Range("255.255.255.255", 32, "the broadcast address"),
  ipv4Range("240.0.0.0", 4, "a reserved address"),
];

function ipv4Refusal(value: number): string | undefined {
  for (const range of blockedIPv4) {
    const mask = range.prefix === 0 ? 0 : (~0 << (32 - range.prefix)) >>> 0;
    if (((value & mask) >>> 0) === range.base) return range.reason;
  }
  return undefined;
}

function ipv6Refusal(words: number[]): string | undefined {
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = words;
  const firstFiveZero = w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0 && w4 === 0;
  if (firstFiveZero && w5 === 0 && w6 === 0 && w7 === 0) return "the unspecified address";
  if (firstFiveZero && w5 === 0 && w6 === 0 && w7 === 1) return "a loopback address";
  // Refused whatever they embed: they are IPv4 in disguise, and public IPv4 needs no disguise.
  if (firstFiveZero && (w5 === 0xffff || w5 === 0)) {
    const embedded = ipv4Refusal(((w6 << 16) | w7) >>> 0);
    const kind = w5 === 0xffff ? "an IPv4-mapped IPv6 address" : "an IPv4-compatible IPv6 address";
    return embedded ? `${kind} embedding ${embedded}` : kind;
  }
  if (w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0 && w4 === 0xffff && w5 === 0) return "an IPv4-translated IPv6 address";
  // NAT64 reaches the IPv4 address in its last 32 bits: judge that one.
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) {
    const embedded = ipv4Refusal(((w6 << 16) | w7) >>> 0);
    return embedded && `a NAT64 address embedding ${embedded}`;
  }
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 1) return "a local-use NAT64 address";
  // 6to4 tunnels to the IPv4 address in bits 16-47.
  if (w0 === 0x2002) {
    const embedded = ipv4Refusal(((w1 << 16) | w2) >>> 0);
    return embedded && `a 6to4 address embedding ${embedded}`;
  }
  if ((w0 & 0xffc0) === 0xfe80) return "a link-local address";
  if ((w0 & 0xffc0) === 0xfec0) return "a site-local address";
  if ((w0 & 0xfe00) === 0xfc00) return "a unique local (private) address";
  if ((w0 & 0xff00) === 0xff00) return "a multicast address";
  if ((w0 & 0xe000) !== 0x2000) return "a reserved IPv6 address (outside global unicast 2000::/3)";
  if (w0 === 0x2001 && w1 === 0) return "a Teredo tunnel address";
  if (w0 === 0x2001 && w1 === 0x0db8) return "a documentation address";
  if (w0 === 0x2001 && w1 < 0x0200) return "an IETF special-purpose address";
  if (w0 === 0x3fff && w1 < 0x1000) return "a documentation address";
  return undefined;
}

/** A dotted quad (already validated by isIP) as an unsigned 32-bit number. */
function parseIPv4(address: string): number {
  return address.split(".").reduce((value, part) => ((value << 8) | Number(part)) >>> 0, 0);
}

/** A valid IPv6 address (already validated by isIP) as its eight 16-bit words. */
function parseIPv6(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const value = parseIPv4(dotted[1]);
    text = `${text.slice(0, dotted.index)}:${(value >>> 16).toString(16)}:${(value & 0xffff).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const headWords = head === "" ? [] : head.split(":");
  const tailWords = tail === undefined || tail === "" ? [] : tail.split(":");
  const zeros = tail === undefined ? [] : new Array<string>(8 - headWords.length - tailWords.length).fill("0");
  return [...headWords, ...zeros, ...tailWords].map((word) => Number.parseInt(word, 16));
}
