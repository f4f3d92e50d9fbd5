/** The channel kit's shared failure helpers of the open platforms (DingTalk, QQ, WeCom). */
import { describe, expect, it } from "vitest";
import { ChannelError } from "../../../src/errors.js";
import { createIssuedSecretScrubber, transportFailure } from "../../../src/gateway/kit/index.js";

describe("createIssuedSecretScrubber", () => {
  it("hides the app's secret, the shapes it is given and the last four tokens issued", () => {
    const scrubber = createIssuedSecretScrubber(["app-secret-1"], [/\baccess_token=[^&\s]+/]);
    for (const token of ["token-aaaa", "token-bbbb", "token-cccc", "token-dddd", "token-eeee"]) scrubber.add(token);
    expect(scrubber.scrub("app-secret-1 ?access_token=xyz token-bbbb token-eeee token-aaaa")).toBe("[secret] ?[secret] [secret] [secret] token-aaaa");
  });
});

describe("transportFailure", () => {
  it("calls a socket failure `network` and anything else `other`, scrubbed, the cause too", () => {
    const scrub = (text: string) => text.replaceAll("s3cret", "[secret]");
    const network = transportFailure(Object.assign(new Error("connect ECONNREFUSED s3cret"), { code: "ECONNREFUSED" }), "qq", "gateway", scrub);
    expect(network).toBeInstanceOf(ChannelError);
    expect(network).toMatchObject({ kind: "network", channel: "qq", message: "qq gateway failed: connect ECONNREFUSED [secret]" });
    expect((network.cause as Error).message).not.toContain("s3cret");
    expect(transportFailure("odd", "wecom", "send", scrub)).toMatchObject({ kind: "other", message: "wecom send failed: odd" });
  });
});
