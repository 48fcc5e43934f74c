#!/usr/bin/env bash
# Build the OpenClaw plugin and run its unit tests, on a fresh machine too:
# Node 24 from npm (scripts/node.sh), the npm packages from the committed
# package-lock.json (`npm ci`, skipped while node_modules matches the lock),
# the TypeScript build to dist/, the type check of the tests, node --test.
# The tests spawn a real brain: $BRAIN_COMMAND, or `brain` on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$(scripts/node.sh):$PATH"
export PATH
stamp=node_modules/.brain-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  # No install scripts: the packages are needed for their types and the SDK entry only.
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  echo "$want" >"$stamp"
fi
npm run --silent build
npx --no-install tsc -p tsconfig.test.json
exec node --test 'test/*.test.ts'
