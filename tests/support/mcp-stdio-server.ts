/**
 * The test MCP server (./mcp-test-server.ts) on stdio, as a program a test config starts:
 * `node --import <tsx> tests/support/mcp-stdio-server.ts`. MCP_TEST_CALL_LOG names a file each
 * call is appended to; MCP_TEST_STDERR is written to stderr at start (a failure's last words).
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createTestMcpServer } from "./mcp-test-server.js";

if (process.env.MCP_TEST_STDERR) process.stderr.write(`${process.env.MCP_TEST_STDERR}\n`);
if (process.env.MCP_TEST_EXIT_AT_START) process.exit(Number(process.env.MCP_TEST_EXIT_AT_START));
const { server } = createTestMcpServer({ callLog: process.env.MCP_TEST_CALL_LOG });
await server.connect(new StdioServerTransport());
