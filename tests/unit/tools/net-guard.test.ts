import { describe, expect, it } from "vitest";
import { addressRefusal, hostnameRefusal, isPublicAddress, parseTarget } from "../../../src/tools/net-guard.js";

describe("addressRefusal", () => {
  it.each([
    ["127.0.0.1", /loopback/],
    ["127.255.255.254", /loopback/],
    ["0.0.0.0", /unspecified/],
    ["0.1.2.3", /this network/],
    ["10.0.0.1", /private/],
    ["172.16.0.1", /private/],
    ["172.31.255.255", /private/],
    ["192.168.1.1", /private/],
    ["100.64.0.1", /carrier-grade NAT/],
    ["100.127.255.255", /carrier-grade NAT/],
    ["169.254.169.254", /link-local.*metadata/],
    ["192.0.0.170", /IETF/],
    ["198.18.0.1", /benchmarking/],
    ["198.19.255.255", /benchmarking/],
    ["224.0.0.251", /multicast/],
    ["239.255.255.250", /multicast/],
    ["240.0.0.1", /reserved/],
    ["255.255.255.255", /broadcast/],
    ["192.0.2.1", /documentation/],
    ["::1", /loopback/],
    ["0:0:0:0:0:0:0:1", /loopback/],
    ["::", /unspecified/],
    ["::ffff:127.0.0.1", /IPv4-mapped.*loopback/],
    ["::ffff:7f00:1", /IPv4-mapped.*loopback/],
    ["::ffff:a9fe:a9fe", /IPv4-mapped.*link-local/],
    ["::ffff:8.8.8.8", /IPv4-mapped/],
    ["::127.0.0.1", /IPv4-compatible.*loopback/],
    ["::ffff:0:7f00:1", /IPv4-translated/],
    ["64:ff9b::7f00:1", /NAT64.*loopback/],
    ["64:ff9b::10.0.0.1", /NAT64.*private/],
    ["64:ff9b:1::1", /local-use NAT64/],
    ["2002:7f00:1::1", /6to4.*loopback/],
    ["2002:c0a8:101::1", /6to4.*private/],
    ["fe80::1", /link-local/],
    ["fe80::1%eth0", /link-local/],
    ["febf::1", /link-local/],
    ["fec0::1", /site-local/],
    ["fc00::1", /unique local/],
    ["fd00::1", /unique local/],
    ["ff02::1", /multicast/],
    ["100::1", /reserved/],
    ["2001:db8::1", /documentation/],
    ["2001::1", /Teredo/],
    ["2001:2::1", /special-purpose/],
    ["not-an-address", /not an IP address/],
    ["0177.0.0.1", /not an IP address/],
  ])("refuses %s", (address, reason) => {
    expect(addressRefusal(address)).toMatch(reason);
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(["8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.1", "172.15.255.255", "172.32.0.1", "192.169.0.1", "198.20.0.1", "223.255.255.255", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "64:ff9b::808:808", "2002:808:808::1"])(
    "allows the public address %s",
    (address) => {
      expect(addressRefusal(address)).toBeUndefined();
      expect(isPublicAddress(address)).toBe(true);
    },
  );
});

describe("hostnameRefusal", () => {
  it.each(["localhost", "LOCALHOST", "localhost.", "api.localhost", "metadata", "metadata.google.internal", "metadata.google.internal.", "db.internal", "printer.local", "router.home.arpa"])(
    "refuses %s",
    (hostname) => expect(hostnameRefusal(hostname)).toBeDefined(),
  );

  it.each(["example.com", "localhost.example.com", "internal.example.com", "metadata.example"])("allows %s", (hostname) => {
    expect(hostnameRefusal(hostname)).toBeUndefined();
  });
});

describe("parseTarget", () => {
  it.each([
    ["http://0177.0.0.1:8080/", "127.0.0.1"],
    ["http://0x7f.1/", "127.0.0.1"],
    ["http://0x7f000001/", "127.0.0.1"],
    ["http://2130706433/", "127.0.0.1"],
    ["http://127.1/", "127.0.0.1"],
    ["http://127.0.0.1./", "127.0.0.1"],
    ["http://%31%32%37.0.0.1/", "127.0.0.1"],
    ["http://１２７.０.０.１/", "127.0.0.1"],
    ["http://0/", "0.0.0.0"],
    ["http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"],
    ["http://[0:0:0:0:0:ffff:7f00:1]/", "::ffff:7f00:1"],
  ])("normalizes the IP literal in %s to %s, so the address check sees the real address", (input, address) => {
    const checked = parseTarget(input);
    expect(checked).toMatchObject({ ok: true, target: { hostname: address } });
    if (checked.ok) expect(checked.target.ipFamily).not.toBe(0);
    expect(isPublicAddress(address)).toBe(false);
  });

  it("keeps names as names, with the port and path", () => {
    expect(parseTarget("https://Example.COM:8443/a?b=c")).toMatchObject({ ok: true, target: { hostname: "example.com", ipFamily: 0 } });
  });

  it.each([
    ["file:///etc/passwd", /scheme file/],
    ["ftp://example.com/", /scheme ftp/],
    ["gopher://example.com/", /scheme gopher/],
    ["javascript:alert(1)", /scheme javascript/],
    ["data:text/plain,hi", /scheme data/],
    ["http://user:secret@example.com/", /credentials/],
    ["http://user@example.com/", /credentials/],
    ["example.com", /not a valid absolute URL/],
    ["http://1.2.3.4.5/", /not a valid absolute URL/],
    ["http://08.1/", /not a valid absolute URL/],
    ["http://4294967296/", /not a valid absolute URL/],
  ])("refuses %s", (input, reason) => {
    const checked = parseTarget(input);
    expect(checked.ok).toBe(false);
    if (!checked.ok) expect(checked.reason).toMatch(reason);
  });
});
