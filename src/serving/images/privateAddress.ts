/**
 * Which IP addresses a server-side fetch of a client-given URL must not reach (SSRF protection for
 * `image_url`): the machine itself, private networks, link-local and carrier-grade NAT ranges,
 * multicast, unspecified, broadcast and reserved addresses, and IPv6 forms that embed such an IPv4 address.
 *
 * The ranges are `ipaddr.js`'s (IANA's IPv4 and IPv6 Special-Purpose Address Registries, RFC 6890):
 * its `range()` names the range an address is in, and this module decides which names are refused.
 * IPv4: 0/8, 10/8, 100.64/10 (RFC 6598), 127/8, 169.254/16, 172.16/12, 192.168/16, 224/4, 255.255.255.255
 * and its reserved set (192.0.0/24, the TEST-NETs, 192.88.99/24, 198.18/15, 240/4). IPv6: ::, ::1,
 * fe80::/10, fc00::/7 (RFC 4193), ff00::/8; ::ffff:0:0/96 (IPv4-mapped), ::ffff:0:0:0/96 (IPv4-translated,
 * RFC 6145), ::/96 (IPv4-compatible), 64:ff9b::/96 (NAT64, RFC 6052) and 2002::/16 (6to4) are judged by
 * the IPv4 address they embed; 64:ff9b:1::/48 (local-use NAT64, RFC 8215) reaches whatever the
 * operator maps it to, so it is refused.
 */
import { isIPv4, isIPv6 } from "node:net";
import ipaddr from "ipaddr.js";

/** The IPv4 ranges of `ipaddr.js` that are refused, and the words used for them. */
const REFUSED_V4: Readonly<Record<string, string>> = {
  unspecified: "unspecified",
  broadcast: "reserved",
  multicast: "multicast",
  linkLocal: "link-local",
  loopback: "loopback",
  carrierGradeNat: "carrier-grade NAT",
  private: "private",
  reserved: "reserved",
};

/** The IPv6 ranges of `ipaddr.js` refused as they are (the embedding ones are judged by their IPv4 address). */
const REFUSED_V6: Readonly<Record<string, string>> = {
  unspecified: "unspecified",
  linkLocal: "link-local",
  multicast: "multicast",
  loopback: "loopback",
  uniqueLocal: "unique local",
};

/**
 * Why `address` must not be fetched from, or undefined when it is a public unicast address.
 *
 * @param address - An IPv4 (`10.0.0.1`) or IPv6 (`fe80::1`, `::ffff:127.0.0.1`, with or without
 *   brackets or a `%zone`) literal, as `dns.lookup` returns them. Only the strict forms `node:net`
 *   accepts are addresses (not `ipaddr.js`'s legacy `127.1` or octal forms).
 * @returns A short description such as `"loopback"` or `"private"`; `"not an IP address"` for text
 *   that parses as neither family (refused too).
 */
export function privateAddressKind(address: string): string | undefined {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (isIPv4(bare)) return v4Kind(ipaddr.IPv4.parse(bare));
  if (isIPv6(bare)) return v6Kind(ipaddr.IPv6.parse(bare));
  return "not an IP address";
}

function v4Kind(address: ipaddr.IPv4): string | undefined {
  return REFUSED_V4[address.range()];
}

function v6Kind(address: ipaddr.IPv6): string | undefined {
  const h = address.parts;
  const range = address.range();
  const refused = REFUSED_V6[range];
  if (refused !== undefined) return refused;
  /** The IPv4 address in groups `at` and `at + 1`. */
  const embedded = (at: number): ipaddr.IPv4 =>
    new ipaddr.IPv4([h[at]! >> 8, h[at]! & 0xff, h[at + 1]! >> 8, h[at + 1]! & 0xff]);
  if (range === "ipv4Mapped") return prefixed("IPv4-mapped", v4Kind(embedded(6)));
  if (range === "rfc6145") return prefixed("IPv4-translated", v4Kind(embedded(6)));
  // ::a.b.c.d (IPv4-compatible, deprecated): the IPv4 address is what is reached.
  if (h.slice(0, 6).every((group) => group === 0)) return prefixed("IPv4-mapped", v4Kind(embedded(6)));
  if (range === "rfc6052") {
    return h[2] === 0 ? prefixed("NAT64", v4Kind(embedded(6))) : "NAT64 local-use";
  }
  if (range === "6to4") return prefixed("6to4", v4Kind(embedded(1)));
  return undefined;
}

function prefixed(form: string, kind: string | undefined): string | undefined {
  return kind === undefined ? undefined : `${form} ${kind}`;
}
