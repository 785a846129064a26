#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 as user `postgres` without a password:
# the retrieval tests create (and drop) their own database there. When none answers, installs
# Debian's `postgresql` (apt-get), lets loopback connections as `postgres` in (trust) and starts the
# cluster with pg_ctlcluster (no systemd needed). Never a mock.
set -euo pipefail

answers() {
  command -v psql >/dev/null 2>&1 &&
    psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -tAc 'SELECT 1' >/dev/null 2>&1
}

if answers; then
  exit 0
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
  echo "installing postgresql (apt-get)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
version="$(ls /etc/postgresql | sort -V | tail -1)"
hba="/etc/postgresql/${version}/main/pg_hba.conf"
if ! $SUDO grep -qE '^host[[:space:]]+all[[:space:]]+postgres[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
  $SUDO sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
fi
echo "starting PostgreSQL ${version} (pg_ctlcluster)" >&2
$SUDO pg_ctlcluster "$version" main start 2>/dev/null || $SUDO pg_ctlcluster "$version" main reload
for _ in $(seq 1 100); do
  if answers; then
    exit 0
  fi
  sleep 0.1
done
echo "PostgreSQL does not answer on 127.0.0.1:5432 as user postgres (see /var/log/postgresql)" >&2
exit 1
