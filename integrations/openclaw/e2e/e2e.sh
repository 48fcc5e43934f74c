#!/usr/bin/env bash
# Real OpenClaw turns with brain as its context engine, checked through brain.
#
#   integrations/openclaw/e2e/e2e.sh [--work DIR]
#
# Installs Node 24 (scripts/node.sh), OpenClaw (OPENCLAW_VERSION, default the
# version the plugin is built against) into a cache directory once, builds
# and packs the plugin, installs the package into a fresh prefix beside that
# OpenClaw (as `openclaw plugins install` would get it: only the packed files),
# then runs run.py: a few `openclaw agent --local` turns against a scripted
# model on 127.0.0.1, and one JSON line of measured results. Exit 0 only when
# every check passed. Needs the repository's virtualenv (./scripts/test makes
# it; PYTHON overrides) and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plugin=$(dirname "$here")
root=$(cd "$plugin/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
node_bin=$("$plugin/scripts/node.sh")
export PATH="$node_bin:$PATH"
version=${OPENCLAW_VERSION:-$(node -p 'require(process.argv[1]).devDependencies.openclaw' "$plugin/package.json")}
cache=${BRAIN_OPENCLAW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/brain-openclaw}/openclaw-$version
openclaw="$cache/node_modules/openclaw"
if [ ! -f "$openclaw/openclaw.mjs" ]; then
  echo "e2e: installing openclaw@$version into $cache" >&2
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "openclaw@$version" >&2
fi
# The plugin as its package ships it: build, pack, install the tarball into a fresh
# prefix whose openclaw (the peer dependency) is the host just installed.
prefix=$(mktemp -d "${TMPDIR:-/tmp}/brain-openclaw-plugin.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
(
  cd "$plugin"
  [ -d node_modules ] || npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
  npm run --silent build >&2
  npm pack --silent --pack-destination "$prefix" >/dev/null
)
npm install --prefix "$prefix" --no-save --no-audit --no-fund --legacy-peer-deps \
  --loglevel=error "$prefix"/*.tgz >&2
ln -s "$openclaw" "$prefix/node_modules/openclaw"  # after the install, which would prune it
name=$(node -p 'require(process.argv[1]).name' "$plugin/package.json")
"$python" "$here/run.py" --openclaw "$openclaw/openclaw.mjs" --node-bin "$node_bin" \
  --plugin "$prefix/node_modules/$name" "$@"
