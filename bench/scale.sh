#!/usr/bin/env bash
# bench/scale.sh: peak memory of the sender and of the agents on a tree of
# SCALE_N empty files (`make bench-scale`; default 10 million).
#
# It generates the tree with bench/gentree (-size 0, SCALE_N/100 directories
# unless SCALE_DIRS), then, each as one measured run:
#
#   walk   `bulkmove plan SRC --parts 16`: one walk with the sharder, parts
#          written to disk (the walk alone: no streams)
#   local  `bulkmove -j J SRC DST`: the in-process receiver (sender and
#          receiver in one process)
#   agent  `bulkmove --via-agent -j J SRC DST`: the sender and J `bulkmove
#          agent` processes, measured apart
#   delete `bulkmove --delete --via-agent -j J SRC DST` on a DST a first,
#          unmeasured move made: the --delete pass over every directory
#          (SCALE_DIRS=0: one flat directory of SCALE_N names)
#
# Peak RSS is the kernel's high-water mark (VmHWM in /proc/PID/status) read
# every 0.2 s until each process exits, so the sender's and each agent's are
# apart (GNU time's "Maximum resident set size" of the sender would be the
# largest of the sender and its children); the sender's is also taken from
# /usr/bin/time -v when it is there. DST is removed between runs.
#
# Needs: about 0.9 KiB of kernel memory per inode of a tmpfs tree (inode and
# dentry, measured here), twice (SRC and DST): 10 million files take about
# 18 GiB of RAM, or 9 GiB with SCALE_DST on a disk. As root it mounts a tmpfs at
# SCALE_MNT with enough inodes (a default tmpfs has one inode per page of
# RAM/2, fewer than 10 million on a 24 GiB machine); otherwise it uses
# SCALE_MNT as it is.
#
# Environment (all optional):
#   BULKMOVE      the bulkmove binary (default ./bin/bulkmove)
#   SCALE_N       files (default 10000000)
#   SCALE_DIRS    directories (default SCALE_N/100)
#   SCALE_LINKS   symlinks and as many hard links to add in each directory
#                 (default 0): entries a move sets aside for its end, which
#                 spill to disk beyond 16,384 of a kind (the 1M-entry test:
#                 SCALE_N=700000 SCALE_DIRS=100000 SCALE_LINKS=1)
#   SCALE_J       streams (default 4)
#   SCALE_RUNS    runs, of walk local agent delete (default "walk local agent")
#   SCALE_MNT     where the trees go (default /mnt/bmscale)
#   SCALE_DST     the destination (default SCALE_MNT/dst); on a disk filesystem
#                 when RAM holds only one tmpfs tree (10 million inodes of tmpfs
#                 took 8.8 GiB here, so two did not fit in 24 GiB)
#   SCALE_TMPFS_SIZE  tmpfs size (default 16g; empty files take no pages); SCALE_TMPFS=0: do not mount
#   SCALE_KEEP    1: keep SRC for the next run (regenerated if N changes)
set -euo pipefail
cd "$(dirname "$0")/.."

BULKMOVE=${BULKMOVE:-$PWD/bin/bulkmove}
N=${SCALE_N:-10000000}
DIRS=${SCALE_DIRS:-$((N / 100))}
LINKS=${SCALE_LINKS:-0}
J=${SCALE_J:-4}
RUNS=${SCALE_RUNS:-walk local agent}
MNT=${SCALE_MNT:-/mnt/bmscale}
DST=${SCALE_DST:-$MNT/dst}
mounted=0

cleanup() {
  rm -rf "$DST" "$MNT/plan"
  if [ "${SCALE_KEEP:-0}" != 1 ]; then rm -rf "$MNT/src" "$MNT/src.n"; fi
  if [ "$mounted" = 1 ]; then umount "$MNT" || true; fi
}
trap cleanup EXIT

mkdir -p "$MNT"
if [ "${SCALE_TMPFS:-1}" != 0 ] && [ "$(id -u)" = 0 ] && ! mountpoint -q "$MNT"; then
  mount -t tmpfs -o "size=${SCALE_TMPFS_SIZE:-16g},nr_inodes=$((2 * N + 2 * DIRS * (1 + 2 * LINKS) + N / 10 + 10000))" bmscale "$MNT"
  mounted=1
fi

if [ ! -d "$MNT/src" ] || [ "$(cat "$MNT/src.n" 2>/dev/null)" != "$N/$DIRS/$LINKS" ]; then
  rm -rf "$MNT/src"
  go run ./bench/gentree -kind small -n "$N" -size 0 -dirs "$DIRS" -links "$LINKS" -o "$MNT/src"
  echo "$N/$DIRS/$LINKS" >"$MNT/src.n"
fi

# hwm PID: the VmHWM of PID in KiB (empty once it is gone).
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }

# measure NAME CMD...: runs CMD, follows its VmHWM and its children's.
measure() {
  local name=$1
  shift
  local log=/tmp/bmscale-$name.log
  local start=$SECONDS
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -v -o /tmp/bmscale-$name.time "$@" >/dev/null 2>"$log" &
  else
    "$@" >/dev/null 2>"$log" &
  fi
  local top=$! pid="" sender=0
  declare -A kids=()
  while kill -0 "$top" 2>/dev/null; do
    if [ -z "$pid" ]; then
      pid=$(pgrep -P "$top" | head -1 || true)
      [ -x /usr/bin/time ] || pid=$top
    fi
    if [ -n "$pid" ]; then
      local h
      h=$(hwm "$pid")
      [ -n "$h" ] && [ "$h" -gt "$sender" ] && sender=$h
      for c in $(pgrep -P "$pid" || true); do
        h=$(hwm "$c")
        if [ -n "$h" ] && [ "$h" -gt "${kids[$c]:-0}" ]; then kids[$c]=$h; fi
      done
    fi
    sleep 0.2
  done
  wait "$top" || { echo "$name: failed:"; tail -5 "$log"; }
  local line="$name: N=$N dirs=$DIRS links=$LINKS -j $J: $((SECONDS - start))s, sender VmHWM $((sender / 1024)) MiB"
  if [ -f /tmp/bmscale-$name.time ]; then
    line+=" (time -v: $(($(awk -F': ' '/Maximum resident/ {print $2}' /tmp/bmscale-$name.time) / 1024)) MiB)"
  fi
  if [ ${#kids[@]} -gt 0 ]; then
    line+="; agents VmHWM MiB:"
    for c in "${!kids[@]}"; do line+=" $((kids[$c] / 1024))"; done
  fi
  echo "$line"
  tail -1 "$log"
  rm -rf "$DST" "$MNT/plan"
}

for r in $RUNS; do
  case $r in
  walk) measure walk "$BULKMOVE" plan "$MNT/src" --parts 16 -o "$MNT/plan" ;;
  local) measure local "$BULKMOVE" --journal none -j "$J" "$MNT/src" "$DST" ;;
  agent) measure agent "$BULKMOVE" --journal none --via-agent -j "$J" "$MNT/src" "$DST" ;;
  delete)
    "$BULKMOVE" --journal none -j "$J" "$MNT/src" "$DST" >/dev/null 2>&1
    measure delete "$BULKMOVE" --journal none --delete --via-agent -j "$J" "$MNT/src" "$DST"
    ;;
  *) echo "unknown run $r (walk, local, agent, delete)" >&2; exit 1 ;;
  esac
done
