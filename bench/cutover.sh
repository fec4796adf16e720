#!/usr/bin/env bash
# Cutover benchmark: incremental passes over the rig's direct link.
#
# On a tree of N files of 1 KiB (default 100,000) on a tmpfs, with the
# destination on box2 (../shared/rig, as root; the script mounts the tmpfs and
# starts the rig if they are not there):
#   - the second pass over an unchanged tree: bulkmove vs rsync -a (both
#     quick-check: size and mtime);
#   - a pass after 1% of the files changed (new content and mtime), each run
#     with other files;
#   - the proof: bulkmove verify (content hashes on both hosts) vs
#     rsync -a --checksum --dry-run.
# bulkmove runs its passes as a cutover script would: --linger keeps its
# agent on box2 between passes, so that a pass opens no login shell (the
# first, untimed copy starts it; a last untimed pass without --linger ends
# it). The no-change pass is also timed without --linger, for comparison.
# Best of CUT_RUNS runs each; the table goes to stdout and CUT_OUT.
#
#   CUT_N     files (default 100000)    CUT_J     bulkmove streams (default 4)
#   CUT_RUNS  runs (default 3)          CUT_MNT   tmpfs mount point (default /mnt/bmbench)
#   CUT_OUT   report (default /tmp/bulkmove-cutover.md)
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
N=${CUT_N:-100000}
J=${CUT_J:-4}
RUNS=${CUT_RUNS:-3}
MNT=${CUT_MNT:-/mnt/bmbench}
OUT=${CUT_OUT:-/tmp/bulkmove-cutover.md}
HOST=box2

RIG=${RIG:-$ROOT/../shared/rig}
die() { echo "cutover: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
if ! mountpoint -q "$MNT"; then
	mkdir -p "$MNT" && mount -t tmpfs -o size=8g,mode=0755 bmcutover "$MNT" || die "cannot mount a tmpfs on $MNT"
	echo "cutover: mounted a tmpfs of 8g on $MNT (left mounted)" >&2
fi
sender() { ip netns exec bm-src "$@"; }
# The rig's sshd sees only the mounts that existed when it started.
if ! sender ssh -o BatchMode=yes -o ConnectTimeout=5 "$HOST" mountpoint -q "$MNT" 2>/dev/null; then
	echo "cutover: (re)starting the rig, so that box2 sees $MNT" >&2
	"$RIG/net.sh" down >/dev/null 2>&1 || true
	"$RIG/net.sh" up >/dev/null || die "the rig does not start ($RIG/net.sh up)"
fi
now() { date +%s.%N; }
# timed VAR CMD...: run CMD in the sender's namespace, the seconds in VAR.
timed() {
	local var=$1 t0 t1
	shift
	t0=$(now)
	sender "$@" >/dev/null 2>/tmp/cutover-last.err || { cat /tmp/cutover-last.err >&2; die "failed: $*"; }
	t1=$(now)
	printf -v "$var" '%.3f' "$(echo "$t1 - $t0" | bc)"
}
best() { printf '%s\n' "$@" | sort -n | head -1; }

D=$MNT/bulkmove-cutover
rm -rf "$D" && mkdir -p "$D"
echo "cutover: generating $N files of 1 KiB" >&2
go run "$ROOT/bench/gentree" -kind small -n "$N" -o "$D/src" -q
echo "cutover: first copies (untimed)" >&2
sender "$BULKMOVE" -j "$J" --journal none --linger 10m "$D/src" "$HOST:$D/bm" 2>/dev/null
sender rsync -a "$D/src/" "$HOST:$D/rs/"

bm_nc=() rs_nc=() bm_1=() rs_1=() bm_v=() rs_v=() bm_sh=()
BM=("$BULKMOVE" -j "$J" --journal none --linger 10m)
for ((r = 1; r <= RUNS; r++)); do
	echo "cutover: run $r of $RUNS" >&2
	timed t "${BM[@]}" "$D/src" "$HOST:$D/bm"; bm_nc+=("$t")
	timed t rsync -a "$D/src/" "$HOST:$D/rs/"; rs_nc+=("$t")
	# Without --linger, as a first pass would: an agent started through a
	# login shell (another state directory, where no lingering one is
	# recorded).
	timed t env XDG_STATE_HOME="$D/state-nolinger" "$BULKMOVE" -j "$J" --journal none "$D/src" "$HOST:$D/bm"; bm_sh+=("$t")
	# 1% of the files change: new content and mtime, other files each run.
	find "$D/src" -type f | sort | awk -v r="$r" -v n="$N" 'NR % 100 == r % 100' |
		while read -r f; do printf 'changed in run %d\n' "$r" >>"$f"; done
	timed t "${BM[@]}" "$D/src" "$HOST:$D/bm"; bm_1+=("$t")
	timed t rsync -a "$D/src/" "$HOST:$D/rs/"; rs_1+=("$t")
	timed t "$BULKMOVE" verify -j "$J" "$D/src" "$HOST:$D/bm"; bm_v+=("$t")
	timed t rsync -a --checksum --dry-run "$D/src/" "$HOST:$D/rs/"; rs_v+=("$t")
done
row() { # name bulkmove-times rsync-times
	local b r
	b=$(best $2) r=$(best $3)
	printf '| %s | %s | %s | %.2f |\n' "$1" "$b" "$r" "$(echo "$b / $r" | bc -l)"
}
{
	echo "## bulkmove cutover benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "$N files of 1 KiB on a tmpfs, pushed to box2 over the rig's direct link; bulkmove -j $J --linger 10m"
	echo "($("$BULKMOVE" version | head -1)); $(rsync --version | head -1). Best of $RUNS runs, seconds;"
	echo "ratio = bulkmove / rsync (below 1: bulkmove is faster)."
	echo
	echo "| pass | bulkmove | rsync | ratio |"
	echo "|---|--:|--:|--:|"
	row "no change (quick check)" "${bm_nc[*]}" "${rs_nc[*]}"
	row "no change, bulkmove without --linger (a login shell per pass)" "${bm_sh[*]}" "${rs_nc[*]}"
	row "1% of files changed" "${bm_1[*]}" "${rs_1[*]}"
	row "verify (bulkmove verify / rsync -a --checksum --dry-run)" "${bm_v[*]}" "${rs_v[*]}"
} | tee "$OUT"
sender "$BULKMOVE" -j "$J" --journal none "$D/src" "$HOST:$D/bm" >/dev/null 2>&1 # ends the lingering agent
rm -rf "$D"
