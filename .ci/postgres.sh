# Source this file, then call pg_start (and pg_stop when done): a throwaway PostgreSQL server on
# 127.0.0.1 in a temporary folder, installed from Debian's packages when the machine lacks it.
# pg_start exports TEST_POSTGRES_URL.
PGPORT="${PGPORT:-55432}"

pg_start() {
  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  fi
  PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  PGDATA="$(mktemp -d /tmp/herald-pg.XXXXXX)"
  chown postgres:postgres "$PGDATA"
  # initdb and postgres refuse to run as root.
  runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null
  psql -h 127.0.0.1 -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1 -qc "CREATE ROLE herald LOGIN PASSWORD 'herald'" \
    -c "CREATE DATABASE herald OWNER herald"
  export PGBIN PGDATA PGPORT
  export TEST_POSTGRES_URL="postgres://herald:herald@127.0.0.1:$PGPORT/herald"
}

pg_stop() {
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PGDATA"
}
