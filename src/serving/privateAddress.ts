/**
 * Which IP addresses a server-side fetch of a client-given URL must not reach (SSRF protection for
 * `image_url`): the machine itself, private networks, link-local and carrier-grade NAT ranges,
 * multicast, unspecified and reserved addresses, and IPv6 forms that embed such an IPv4 address.
 *
 * Ranges: IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890): 0/8, 10/8, 100.64/10
 * (RFC 6598), 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.168/16, 198.18/15, 224/4, 240/4;
 * ::, ::1, fe80::/10, fc00::/7 (RFC 4193), ff00::/8, plus ::ffff:0:0/96 (IPv4-mapped), ::/96
 * (IPv4-compatible), 64:ff9b::/96 (NAT64, RFC 6052) and 2002::/16 (6to4), whose embedded IPv4
 * address is checked as IPv4.
 */
import { isIPv4, isIPv6 } from "node:net";

/** IPv4 ranges refused, as [first octets, prefix length in bits, name]. */
const PRIVATE_V4: readonly (readonly [number, number, number, number, string])[] = [
  [0, 0, 0, 8, "unspecified"],
  [10, 0, 0, 8, "private"],
  [100, 64, 0, 10, "carrier-grade NAT"],
  [127, 0, 0, 8, "loopback"],
  [169, 254, 0, 16, "link-local"],
  [172, 16, 0, 12, "private"],
  [192, 0, 0, 24, "IETF protocol assignments"],
  [192, 168, 0, 16, "private"],
  [198, 18, 0, 15, "benchmarking"],
  [224, 0, 0, 4, "multicast"],
  [240, 0, 0, 4, "reserved"],
];

/**
 * Why `address` must not be fetched from, or undefined when it is a public unicast address.
 *
 * @param address - An IPv4 (`10.0.0.1`) or IPv6 (`fe80::1`, `::ffff:127.0.0.1`, with or without
 *   brackets or a `%zone`) literal, as `dns.lookup` returns them.
 * @returns A short description such as `"loopback"` or `"private"`; `"not an IP address"` for text
 *   that parses as neither family (refused too).
 */
export function privateAddressKind(address: string): string | undefined {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (isIPv4(bare)) return v4Kind(bare.split(".").map(Number));
  if (isIPv6(bare)) return v6Kind(parseV6(bare));
  return "not an IP address";
}

function v4Kind(octets: readonly number[]): string | undefined {
  const value = ((octets[0]! << 24) | (octets[1]! << 16) | (octets[2]! << 8) | octets[3]!) >>> 0;
  for (const [a, b, c, bits, kind] of PRIVATE_V4) {
    const base = ((a << 24) | (b << 16) | (c << 8)) >>> 0;
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    if ((value & mask) >>> 0 === base) return kind;
  }
  return undefined;
}

function v6Kind(h: readonly number[]): string | undefined {
  const embeddedV4 = (at: number): number[] => [
    h[at]! >> 8,
    h[at]! & 0xff,
    h[at + 1]! >> 8,
    h[at + 1]! & 0xff,
  ];
  const zeroUpTo = (n: number): boolean => h.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8)) return "unspecified";
  if (zeroUpTo(7) && h[7] === 1) return "loopback";
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible): the IPv4 address is what is reached.
  if (zeroUpTo(5) && (h[5] === 0xffff || h[5] === 0)) return prefixed("IPv4-mapped", v4Kind(embeddedV4(6)));
  if (h[0] === 0x64 && h[1] === 0xff9b && h.slice(2, 6).every((x) => x === 0)) {
    return prefixed("NAT64", v4Kind(embeddedV4(6)));
  }
  if (h[0] === 0x2002) return prefixed("6to4", v4Kind(embeddedV4(1)));
  if ((h[0]! & 0xffc0) === 0xfe80) return "link-local";
  if ((h[0]! & 0xfe00) === 0xfc00) return "unique local";
  if ((h[0]! & 0xff00) === 0xff00) return "multicast";
  return undefined;
}

function prefixed(form: string, kind: string | undefined): string | undefined {
  return kind === undefined ? undefined : `${form} ${kind}`;
}

/** The eight 16-bit groups of a valid IPv6 literal (`::` expanded, a dotted IPv4 tail converted). */
function parseV6(text: string): number[] {
  let body = text.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(body);
  if (dotted) {
    const o = dotted[1]!.split(".").map(Number);
    body = `${body.slice(0, dotted.index)}${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`;
  }
  const [head = "", tail] = body.split("::");
  const groups = (part: string): number[] =>
    part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
