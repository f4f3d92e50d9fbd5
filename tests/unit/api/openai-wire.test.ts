/** The OpenAI wire helpers: what a stream still owes of the final text, the request's user turn, the error shape. */
import { describe, expect, it } from "vitest";
import { OpenAiError, openAiErrorBody, parseChatRequest, unshownTail, userTurnOf } from "../../../src/api/openai/wire.js";

describe("unshownTail", () => {
  it("sends the rest when the final extends what was streamed", () => {
    expect(unshownTail("", "Hello")).toBe("Hello");
    expect(unshownTail("Hel", "Hello")).toBe("lo");
    expect(unshownTail("Hello", "Hello")).toBe("");
  });

  it("takes the longest end of what was shown that starts the final as shown", () => {
    // The last draft did not arrive before the final, which says the same thing from its start.
    expect(unshownTail("Let me check.\n\nThe answer is 4", "The answer is 42.")).toBe("2.");
    expect(unshownTail("Let me check.\n\nThe answer is 42.", "The answer is 42.")).toBe("");
  });

  it("sends the whole final, set apart, when nothing shown leads into it", () => {
    expect(unshownTail("Working on it.", "Sorry, something went wrong")).toBe("\n\nSorry, something went wrong");
  });
});

describe("the request", () => {
  const parse = (body: unknown) => {
    try {
      return userTurnOf(parseChatRequest(body));
    } catch (error) {
      return error as OpenAiError;
    }
  };

  it("reads the last message's text, from a string or from text parts, and ignores the fields it has no use for", () => {
    expect(parse({ model: "m", messages: [{ role: "system", content: "be terse" }, { role: "user", content: "hi" }], temperature: 0.2, seed: 1 })).toBe("hi");
    expect(parse({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "one" }, { type: "text", text: "two" }] }] })).toBe("one\ntwo");
  });

  it("names the bad field in the message and in `param`", () => {
    const error = parse({ model: "m", messages: [] }) as OpenAiError;
    expect(error).toBeInstanceOf(OpenAiError);
    expect(error.details.param).toBe("messages");
    expect(error.message).toMatch(/^messages: expected at least 1 item/);
    expect((parse({ model: "m", messages: [{ role: "user", content: "   " }] }) as OpenAiError).details.param).toBe("messages[0].content");
    expect((parse({ model: "m", messages: [{ role: "user", content: [{ type: "text" }] }] }) as OpenAiError).details.param).toBe("messages[0].content[0].text");
    expect((parse("not an object") as OpenAiError).details.param).toBe("body");
  });

  it("answers errors in OpenAI's shape, with the status's type", () => {
    expect(openAiErrorBody({ status: 401, message: "wrong key", code: "invalid_api_key" })).toEqual({ error: { message: "wrong key", type: "invalid_request_error", param: null, code: "invalid_api_key" } });
    expect(openAiErrorBody({ status: 503, message: "down" }).error.type).toBe("server_error");
    expect(openAiErrorBody({ status: 429, message: "slow down" }).error.type).toBe("rate_limit_error");
    const thrown = new OpenAiError("model: no such team", 404, { param: "model", code: "model_not_found" });
    expect(openAiErrorBody({ status: 404, message: thrown.message, error: thrown })).toEqual({ error: { message: "model: no such team", type: "invalid_request_error", param: "model", code: "model_not_found" } });
  });
});
