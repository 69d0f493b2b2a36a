#!/usr/bin/env bash
# Installs the MCP Inspector CLI from npm, at a pinned version, into a folder visor owns: the real MCP client
# that agent/mcpserver's tests drive visor's server with (stdio and streamable HTTP). npm's own configuration
# chooses the registry. Idempotent: a second run only checks the installed version. Prints the CLI's path.
#
# Usage: scripts/install-mcp-inspector.sh [DIR]   (default: ${XDG_CACHE_HOME:-~/.cache}/visor/mcp-inspector)
set -euo pipefail

version=1.0.3
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/mcp-inspector}
bin="$dir/node_modules/.bin/mcp-inspector-cli"
pkg="$dir/node_modules/@modelcontextprotocol/inspector-cli/package.json"

if [ -x "$bin" ] && grep -q "\"version\": \"$version\"" "$pkg" 2>/dev/null; then
  echo "$bin"
  exit 0
fi
command -v npm >/dev/null || { echo "install-mcp-inspector: npm not found (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
# stdout carries the path; npm's progress goes to stderr.
npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund \
  "@modelcontextprotocol/inspector-cli@$version" >&2
[ -x "$bin" ] || { echo "install-mcp-inspector: $bin missing after npm install" >&2; exit 1; }
echo "$bin"
