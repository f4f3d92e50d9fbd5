import { describe, expect, it } from "vitest";
import { renderTelegramHtml, telegramRenderedLength } from "../../../channels/telegram/render-html.js";

/**
 * Checks `html` the way Telegram's parser reads it: only its tags (b i u s code pre a blockquote),
 * properly nested, `href` on links and `class="language-…"` on a code directly inside pre as the
 * only attributes, nothing inside code/pre, no code or link inside a link, no nested blockquote,
 * and `& < >` in text only as entities. Returns the visible text, or throws saying what is wrong.
 */
function parseTelegramHtml(html: string): string {
  const stack: string[] = [];
  let visible = "";
  let index = 0;
  while (index < html.length) {
    const char = html[index]!;
    if (char === "<") {
      const tag = /^<(\/?)([a-z]+)((?:\s+[a-z]+="[^"<>]*")*)>/.exec(html.slice(index));
      if (!tag) throw new Error(`stray "<" at ${index}: ${html.slice(index, index + 20)}`);
      const [whole, closing, name, attributes] = tag as unknown as [string, string, string, string];
      if (!["b", "i", "u", "s", "code", "pre", "a", "blockquote"].includes(name)) throw new Error(`unsupported tag <${name}>`);
      if (closing) {
        if (attributes) throw new Error(`attributes on </${name}>`);
        if (stack.pop() !== name) throw new Error(`</${name}> closes nothing open`);
      } else {
        const parent = stack.at(-1);
        if (parent === "pre" && !(name === "code" && html.slice(index - 5, index) === "<pre>")) throw new Error(`<${name}> inside <pre>`);
        if (parent === "code") throw new Error(`<${name}> inside <code>`);
        if (stack.includes("a") && (name === "a" || name === "code" || name === "pre")) throw new Error(`<${name}> inside a link`);
        if (name === "blockquote" && stack.includes("blockquote")) throw new Error("nested blockquote");
        if (attributes) {
          const allowed = (name === "a" && /^\s+href="[^"]+"$/.test(attributes)) || (name === "code" && parent === "pre" && /^\s+class="language-[\w+#.-]+"$/.test(attributes));
          if (!allowed) throw new Error(`attributes ${attributes} on <${name}>`);
        }
        if (name === "a" && !attributes) throw new Error("<a> without href");
        stack.push(name);
      }
      index += whole.length;
    } else if (char === "&") {
      const entity = /^&(lt|gt|amp|quot);/.exec(html.slice(index));
      if (!entity) throw new Error(`stray "&" at ${index}: ${html.slice(index, index + 12)}`);
      visible += { lt: "<", gt: ">", amp: "&", quot: '"' }[entity[1] as "lt"];
      index += entity[0].length;
    } else if (char === ">") {
      throw new Error(`stray ">" at ${index}`);
    } else {
      visible += char;
      index += 1;
    }
  }
  if (stack.length > 0) throw new Error(`unclosed <${stack.join("> <")}>`);
  return visible;
}

const telegram = (text: string) => renderTelegramHtml(text);

describe("renderTelegramHtml", () => {
  it("renders the common Markdown of model replies", () => {
    expect(telegram("Hello **bold**, *italic*, ~~gone~~ and `a < b`")).toBe("Hello <b>bold</b>, <i>italic</i>, <s>gone</s> and <code>a &lt; b</code>");
    expect(telegram("# Title\n\nText")).toBe("<b>Title</b>\n\nText");
    expect(telegram("- one\n- two\n  - nested\n1. first")).toBe("• one\n• two\n  • nested\n\n1. first");
    expect(telegram("- [ ] todo\n- [x] done")).toBe("• ☐ todo\n• ☑ done");
    expect(telegram("> quoted **line**")).toBe("<blockquote>quoted <b>line</b></blockquote>");
    expect(telegram("[site](https://example.com/?a=1&b=2)")).toBe('<a href="https://example.com/?a=1&amp;b=2">site</a>');
    expect(telegram("```ts\nconst x = a < b && c;\n```")).toBe('<pre><code class="language-ts">const x = a &lt; b &amp;&amp; c;</code></pre>');
    expect(telegram("```\nplain\n```")).toBe("<pre>plain</pre>");
    expect(telegram("line one\nline two")).toBe("line one\nline two");
  });

  it("escapes raw HTML and entities the model wrote instead of passing them on", () => {
    expect(telegram("a <script>alert(1)</script> & <b>b</b> &nbsp;")).toBe("a &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;b&lt;/b&gt; &amp;nbsp;");
    expect(telegram("<div>\nblock html\n</div>")).toBe("&lt;div&gt;\nblock html\n&lt;/div&gt;");
  });

  it("keeps links Telegram would refuse as text", () => {
    expect(telegram("[x](javascript:alert(1))")).not.toContain("<a");
    expect(telegram("[rel](/relative/path)")).toBe("rel (/relative/path)");
    expect(telegram('[q](https://e.com/"><b>)')).not.toMatch(/href="[^"]*"[^>]/);
  });

  it("writes tables as monospace text and images as links", () => {
    expect(telegram("| a | bb |\n|---|---|\n| 1 | <x> |")).toBe("<pre>a | bb\n--+----\n1 | &lt;x&gt;</pre>");
    expect(telegram("![chart](https://e.com/c.png)")).toBe('<a href="https://e.com/c.png">chart</a>');
  });

  it("leaves unbalanced markup as literal text", () => {
    expect(telegram("**not closed and *also not")).toBe("**not closed and *also not");
    expect(telegram("price: 5 * 3 = 15 * 1")).toBe("price: 5 * 3 = 15 * 1");
    expect(telegram("`unclosed code")).toBe("`unclosed code");
  });

  it("renders a half code fence (a cut-off stream) as a code block to the end", () => {
    expect(telegram("Here:\n```python\nprint('<x>')")).toBe("Here:\n\n<pre><code class=\"language-python\">print('&lt;x&gt;')</code></pre>");
  });

  it("never opens a tag Telegram cannot nest", () => {
    for (const text of [
      "**[`code` in a link](https://e.com)**",
      "> quote\n> ```js\n> code()\n> ```\n> > nested quote",
      "***both*** and **bold *italic **bold again** inside***",
      "# heading with **bold** and `code`",
      "- > quote in a list\n  ```\n  code in a list\n  ```",
    ]) {
      expect(() => parseTelegramHtml(telegram(text)), text).not.toThrow();
    }
  });

  it("shows the source when the rendering would have no visible text", () => {
    expect(telegram("```\n```")).toBe("```\n```");
  });

  describe("nasty inputs always give valid Telegram HTML that keeps the words", () => {
    const pieces = ["*", "**", "_", "__", "`", "```", "~~", "<", ">", "&", "&amp;", "</b>", "<b>", "<a href='x'>", "[", "]", "(", ")", "](", "![", "#", "> ", "- ", "1. ", "|", "\\", '"', "\n", "\n\n", " ", "word", "Wort", "слово", "😀", "https://e.com/x?a=1&b=<2>", "<pre>", "</code>", "&#x27;", "- [ ] ", "---", "***", "\n```js\n", "\n~~~\n"];
    let seed = 12345;
    const next = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
    const cases = Array.from({ length: 500 }, () => Array.from({ length: 1 + Math.floor(next() * 40) }, () => pieces[Math.floor(next() * pieces.length)]).join(""));

    it.each(cases.map((text, index) => [index, text]))("case %i", (_index, text) => {
      const html = telegram(text as string);
      const visible = parseTelegramHtml(html);
      // Entity references are decoded (CommonMark): they are not letters the reader should see.
      const letters = (value: string) => [...value.replace(/&#x27;|&amp;/g, "")].filter((char) => /\p{L}/u.test(char)).sort().join("");
      // Every letter of the input is still there: shown, or as a link target or code language.
      const shown = letters(visible + [...html.matchAll(/(?:href|class)="([^"]*)"/g)].map((match) => match[1]).join(""));
      for (const char of new Set(letters(text as string))) {
        expect(shown.split(char).length, `letter ${char}`).toBeGreaterThanOrEqual(letters(text as string).split(char).length);
      }
    });
  });
});

describe("telegramRenderedLength", () => {
  it("counts what Telegram counts: the text after entity parsing", () => {
    expect(telegramRenderedLength("**ab** <c>")).toBe("ab <c>".length);
  });
});
