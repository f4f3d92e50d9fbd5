/**
 * An MCP tool's answer as the text the model reads. Text parts as they are, embedded text
 * resources with their URI; what text cannot carry (images, audio, binary resources) is named, not
 * inlined. The whole is wrapped as untrusted data: a server's answer often quotes the web, a
 * repository or a mailbox, and must not steer the agent.
 */
import type { ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import { wrapUntrusted } from "../untrusted.js";

/** What `callTool` resolves to, as far as it is read here (current and pre-2025 result shapes). */
export interface McpCallResult {
  content?: ContentBlock[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  /** The result shape of protocol version 2024-10-07 and earlier. */
  toolResult?: unknown;
}

/** The model's text for one call of `tool` on `server`; starts with "Error:" when the server says the call failed. */
export function formatToolResult(server: string, tool: string, result: McpCallResult): string {
  const text = resultText(result);
  const wrapped = wrapUntrusted(`mcp:${server}/${tool}`, text, `the MCP server "${server}"`);
  if (result.isError) return `Error: the tool ${tool} of the MCP server "${server}" reported a failure. Next: read its message below, fix the arguments or do it another way.\n${wrapped}`;
  return wrapped;
}

function resultText(result: McpCallResult): string {
  const parts = (result.content ?? []).map(describeBlock);
  if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent, null, 2));
  if (parts.length === 0 && result.toolResult !== undefined) parts.push(typeof result.toolResult === "string" ? result.toolResult : JSON.stringify(result.toolResult, null, 2));
  return parts.length === 0 ? "(no output)" : parts.join("\n\n");
}

function describeBlock(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
    case "audio":
      return `[${block.type} (${block.mimeType}, about ${Math.floor((block.data.length * 3) / 4)} bytes) not shown: this chat passes tool results as text]`;
    case "resource_link":
      return `[resource: ${block.name} ${block.uri}${block.description ? ` (${block.description})` : ""}]`;
    case "resource": {
      const resource = block.resource;
      if ("text" in resource && typeof resource.text === "string") return `[resource ${resource.uri}]\n${resource.text}`;
      return `[binary resource ${resource.uri}${resource.mimeType ? ` (${resource.mimeType})` : ""} not shown]`;
    }
    default:
      return JSON.stringify(block);
  }
}
