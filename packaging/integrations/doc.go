// Package integrations holds the ready-made snippets that plug continuityd
// into Claude Code, Codex and any MCP client, and the test that keeps them
// working. The snippets are files meant to be copied, not code.
package integrations
