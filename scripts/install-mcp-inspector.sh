#!/usr/bin/env bash
# Installs the MCP Inspector CLI from npm, at a pinned version, into a folder visor owns: the real MCP client
# that frontend/mcpserver's tests drive visor's server with (stdio and streamable HTTP). npm's own configuration
# chooses the registry. Idempotent: a second run only checks the installed version. Prints the CLI's path.
#
# Usage: scripts/install-mcp-inspector.sh [DIR]   (default: ${XDG_CACHE_HOME:-~/.cache}/visor/mcp-inspector/VERSION)
set -euo pipefail

# What `npx @modelcontextprotocol/inspector --cli` runs today. It declares Node >= 22.19 but its CLI runs on
# Debian 12's Node 20 (npm warns EBADENGINE and installs it).
version=2.12.0
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/mcp-inspector/$version}
bin="$dir/node_modules/.bin/mcp-inspector"
pkg="$dir/node_modules/@modelcontextprotocol/inspector/package.json"

if [ -x "$bin" ] && grep -q "\"version\": \"$version\"" "$pkg" 2>/dev/null; then
  echo "$bin"
  exit 0
fi
command -v npm >/dev/null || { echo "install-mcp-inspector: npm not found (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
. "$(dirname "$0")/progress.sh"
# stdout carries the path; npm's messages and the progress lines go to stderr (npm itself is silent while it
# fetches, a minute or more on a slow link).
progress "install-mcp-inspector: installing the MCP Inspector CLI $version from npm into $dir (~1 min) …" \
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
  "@modelcontextprotocol/inspector@$version" >&2
[ -x "$bin" ] || { echo "install-mcp-inspector: $bin missing after npm install" >&2; exit 1; }
echo "$bin"
