/**
 * Internal markers never reach a platform: the `<!-- WORKFLOW_EXECUTION_METADATA … -->` comment a
 * team run's result carries for the model, and any other HTML comment a prompt puts in, which a
 * model may echo. Outside code, every `<!-- … -->` goes (and an unclosed one to the end of the
 * text, as a draft may stop mid-comment); inside fenced or inline code, where a comment may be
 * what the user asked for, only the markers: comments opening with an upper-case NAME_LIKE_THIS.
 */
const ANY_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const MARKER_COMMENT = /<!--\s*[A-Z][A-Z0-9]*_[A-Z0-9_]+[\s\S]*?(?:-->|$)/g;
/** Fenced blocks (``` or ~~~, to their closing fence or the end) and inline code spans. */
const CODE = /(^|\n)(`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:\n\2[ \t]*(?=\n|$)|$)|`[^`\n]+`/g;

export function stripInternalMarkers(text: string): string {
  if (!text.includes("<!--")) return text;
  let result = "";
  let last = 0;
  for (const match of text.matchAll(CODE)) {
    result += text.slice(last, match.index).replace(ANY_COMMENT, "");
    result += match[0].replace(MARKER_COMMENT, "");
    last = match.index + match[0].length;
  }
  result += text.slice(last).replace(ANY_COMMENT, "");
  // A comment closing the text (the run's metadata) leaves the blank lines before it.
  return result.trimEnd();
}
