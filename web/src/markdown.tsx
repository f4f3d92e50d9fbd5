/**
 * Markdown from the model (or a user, or a team agent) as HTML: marked renders it, DOMPurify
 * removes everything that could run or act (script, event handlers, javascript: URLs, forms,
 * frames, styles) before the browser sees it. The page's CSP (`script-src 'self'`) is the second
 * wall, not the first: a reply must be harmless even where that header is lost.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";

const marked = new Marked({ gfm: true, breaks: true, async: false });

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  // Links open elsewhere and tell the other site nothing about this page.
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const SANITIZE = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style"],
};

/** The sanitized HTML of `text`. */
export function renderMarkdown(text: string): string {
  return purify.sanitize(marked.parse(text) as string, SANITIZE);
}

/**
 * What `text` reads as once rendered, without its markup: for places that take text only (a
 * select's options). Parsed by the sanitizer into a fragment no document holds: nothing loads or runs.
 */
export function plainText(text: string): string {
  const fragment = purify.sanitize(marked.parse(text) as string, { ...SANITIZE, RETURN_DOM_FRAGMENT: true });
  return (fragment.textContent ?? "").replace(/\s+/g, " ").trim();
}

export function Markdown(props: { text: string; class?: string }) {
  return <div class={`markdown ${props.class ?? ""}`} dangerouslySetInnerHTML={{ __html: renderMarkdown(props.text) }} />;
}
