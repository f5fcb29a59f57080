#!/usr/bin/env bash
#
# backup_rotate.sh — nightly snapshot backups of a home server onto an external disk.
#
# Each run makes a new dated snapshot directory with rsync. Files that did not change since the
# previous snapshot are hard-linked to it (--link-dest), so every snapshot looks like a complete
# copy but only changed files take new space on the disk. Old snapshots are then thinned out:
# we keep 7 daily, 4 weekly and 6 monthly snapshots.
#
# Install: copy to /usr/local/sbin, make it executable, and add to root's crontab:
#     30 2 * * *  /usr/local/sbin/backup_rotate.sh
# (2:30 in the morning, after the database dump at 2:00 has finished.)
#
# Configuration comes from the environment, or from /etc/default/backup-rotate if it exists:
#     BACKUP_SRC      what to back up (default: /srv)
#     BACKUP_DEST     the mounted backup disk (default: /mnt/backup)
#     BACKUP_EXCLUDES a file of rsync exclude patterns (default: /etc/backup-rotate.exclude)
#     HEALTHCHECK_URL optional URL pinged on success, so a silent failure gets noticed
#
# Exit codes: 0 success, 1 configuration problem, 2 backup disk not mounted,
#             3 another run still in progress, 4 rsync failed.

set -euo pipefail

if [[ -r /etc/default/backup-rotate ]]; then
    # shellcheck disable=SC1091
    . /etc/default/backup-rotate
fi

BACKUP_SRC="${BACKUP_SRC:-/srv}"
BACKUP_DEST="${BACKUP_DEST:-/mnt/backup}"
BACKUP_EXCLUDES="${BACKUP_EXCLUDES:-/etc/backup-rotate.exclude}"
HEALTHCHECK_URL="${HEALTHCHECK_URL:-}"

KEEP_DAILY=7
KEEP_WEEKLY=4
KEEP_MONTHLY=6

LOG_FILE=/var/log/backup-rotate.log
LOCK_FILE=/run/lock/backup-rotate.lock
SNAPSHOTS="$BACKUP_DEST/snapshots"
TODAY="$(date +%Y-%m-%d)"

log() {
    # One line per event with a timestamp, both to the log and to stderr so cron mails it.
    printf '%s %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$*" | tee -a "$LOG_FILE" >&2
}

die() {
    local code="$1"
    shift
    log "ERROR: $*"
    exit "$code"
}

# --- Preconditions -------------------------------------------------------------------------

[[ -d "$BACKUP_SRC" ]] || die 1 "source $BACKUP_SRC does not exist"

# Refuse to write into an empty mount point: if the USB disk is not mounted, rsync would
# happily fill the root file system instead. The marker file is created once by hand on the
# backup disk with:  touch /mnt/backup/.backup-disk
[[ -f "$BACKUP_DEST/.backup-disk" ]] || die 2 "backup disk not mounted at $BACKUP_DEST"

# Only one run at a time. A slow run (for example the first full copy, which can take many
# hours) must not be joined by the next night's run. flock releases the lock automatically when
# the script exits, even if it is killed.
exec 9>"$LOCK_FILE"
flock -n 9 || die 3 "another backup is still running"

mkdir -p "$SNAPSHOTS"

# --- Snapshot ------------------------------------------------------------------------------

LATEST="$(find "$SNAPSHOTS" -mindepth 1 -maxdepth 1 -type d -name '20*' | sort | tail -n 1 || true)"
TARGET="$SNAPSHOTS/$TODAY"
PARTIAL="$TARGET.partial"

rsync_args=(
    --archive          # permissions, times, symlinks, owners
    --hard-links       # keep hard links inside the source as hard links
    --acls --xattrs
    --delete           # the snapshot mirrors the source exactly
    --numeric-ids      # restore on another machine without a matching /etc/passwd
    --one-file-system  # never descend into other mounts, such as the backup disk itself
)
if [[ -r "$BACKUP_EXCLUDES" ]]; then
    rsync_args+=(--exclude-from="$BACKUP_EXCLUDES")
fi
if [[ -n "$LATEST" && "$LATEST" != "$TARGET" ]]; then
    rsync_args+=(--link-dest="$LATEST")
fi

log "snapshot $TODAY of $BACKUP_SRC starting (previous: ${LATEST:-none})"

# Write into a .partial directory and rename at the end, so an interrupted run never leaves
# something that looks like a complete snapshot. Exit code 24 ("some files vanished") is
# normal on a live system and is not treated as a failure.
set +e
rsync "${rsync_args[@]}" "$BACKUP_SRC/" "$PARTIAL/"
status=$?
set -e
if [[ $status -ne 0 && $status -ne 24 ]]; then
    die 4 "rsync failed with status $status; $PARTIAL left for inspection"
fi
rm -rf "$TARGET"
mv "$PARTIAL" "$TARGET"
log "snapshot $TODAY complete"

# --- Retention -----------------------------------------------------------------------------
#
# A snapshot survives if it is one of the newest KEEP_DAILY, or the newest of its ISO week
# for the newest KEEP_WEEKLY weeks, or the newest of its month for the newest KEEP_MONTHLY
# months. Everything else is deleted. Because of the hard links, deleting a snapshot frees
# only the files that no other snapshot shares.

declare -A keep=()
mapfile -t all < <(find "$SNAPSHOTS" -mindepth 1 -maxdepth 1 -type d -name '20??-??-??' | sort -r)

for snap in "${all[@]:0:$KEEP_DAILY}"; do
    keep["$snap"]=1
done

declare -A seen_week=() seen_month=()
for snap in "${all[@]}"; do
    day="$(basename "$snap")"
    week="$(date -d "$day" +%G-%V)"
    month="${day:0:7}"
    if [[ -z "${seen_week[$week]:-}" && ${#seen_week[@]} -lt $KEEP_WEEKLY ]]; then
        seen_week["$week"]=1
        keep["$snap"]=1
    fi
    if [[ -z "${seen_month[$month]:-}" && ${#seen_month[@]} -lt $KEEP_MONTHLY ]]; then
        seen_month["$month"]=1
        keep["$snap"]=1
    fi
done

for snap in "${all[@]}"; do
    if [[ -z "${keep[$snap]:-}" ]]; then
        log "pruning old snapshot $(basename "$snap")"
        rm -rf -- "$snap"
    fi
done

# --- Report --------------------------------------------------------------------------------

used="$(df -h --output=pcent "$BACKUP_DEST" | tail -n 1 | tr -d ' ')"
log "done: ${#keep[@]} snapshots kept, backup disk $used full"

# Warn (but do not fail) when the disk is nearly full; the retention above is the only thing
# that frees space, so a growing source needs a bigger disk or shorter retention.
if [[ "${used%\%}" -ge 90 ]]; then
    log "WARNING: backup disk above 90%; consider KEEP_MONTHLY=3"
fi

if [[ -n "$HEALTHCHECK_URL" ]]; then
    curl -fsS -m 10 --retry 3 "$HEALTHCHECK_URL" >/dev/null || log "healthcheck ping failed"
fi
