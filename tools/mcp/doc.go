// Package mcp puts the tools of Model Context Protocol servers into visor's tool registry. Connect starts a
// server as a subprocess (stdio) or dials it over streamable HTTP, lists its tools, and wraps each as a
// tools.Tool whose name carries the server's name, so two servers cannot collide; calls go to tools/call and
// come back as tools.Result (text, exact image bytes, IsError). A server process that died is restarted once
// on the next call, and registries the tools were registered into follow the server's tool list changes.
// ParseServer reads the command-line form NAME=COMMAND ARGS… or NAME=URL.
//
// It does not expose visor itself over MCP (frontend/mcpserver does), and it ignores resources, prompts,
// sampling and elicitation: visor's agent only calls tools.
package mcp
