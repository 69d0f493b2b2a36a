#!/usr/bin/env bash
# Installs Debian's llama-server into visor's engine folder. The installer itself lives in engine/install, where the
# binary embeds it for `visor engine install`; see there for the flags and environment.
exec bash "$(dirname "$0")/../engine/install/install-engine.sh" "$@"
