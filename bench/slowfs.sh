#!/usr/bin/env bash
# bench/slowfs.sh: trees on a high-latency filesystem, `make bench-slowfs`.
#
# NFS, Lustre and GPFS cost a server round trip per lookup, stat, open and
# create; ../shared/rig/slowfs stands in for them: a FUSE mount of a tmpfs
# directory with SLOW_DELAY before every metadata operation (file data is not
# delayed). For each side (the source on slowfs, then the destination), each
# dataset and each mode (local; over the rig's direct SSH link), it times
#   - one `tar | tar` (over SSH: `tar | ssh box2 tar -x`),
#   - SLOW_PIPES such pipes at once, the file list split by hand beforehand
#     (round robin; the splitting is not timed), as an operator would,
#   - bulkmove -j SLOW_J (--io-concurrency auto, the default); over SSH also with
#     --transport tls (SSH starts the agent, the streams go over TLS: on this 2-core
#     machine SSH's own encryption, not the filesystem, would set the pace),
# and reports bulkmove's speed-up over one tar and its time against the hand-split pipes
# (over SSH, of the faster of its two transports).
# bulkmove's copies are checked with bench/treecmp.
#
# Datasets: k1 (1,000 files of 100 KiB in 10 directories) and mixed (bench/gentree's
# mixed tree, SLOW_MIXED_N files: small and large files, deep and wide directories,
# symlinks, hard links).
#
# Needs root (FUSE, the rig's namespaces). The SSH mode needs the rig: its sshd sees only
# mounts that existed when it started, so the script restarts the rig (net.sh down; up)
# after mounting slowfs when box2 cannot see the mount.
#
#   SLOW_SIDES  "src dst"     SLOW_MODES  "local ssh"     SLOW_SETS  "k1 mixed"
#   SLOW_DELAY  1ms           SLOW_PIPES  32              SLOW_J     4
#   SLOW_MIXED_N 2000         SLOW_RUNS   1 (best of)     SLOW_MNT   /mnt/bmbench (a tmpfs)
#   SLOW_OUT    /tmp/bulkmove-slowfs.md
#   SLOW_FUSE   /mnt/bulkmove-slowfs (the FUSE mount point: another one lets two runs share the machine)
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
SIDES=${SLOW_SIDES:-src dst}
MODES=${SLOW_MODES:-local ssh}
SETS=${SLOW_SETS:-k1 mixed}
DELAY=${SLOW_DELAY:-1ms}
PIPES=${SLOW_PIPES:-32}
J=${SLOW_J:-4}
MIXED_N=${SLOW_MIXED_N:-2000}
RUNS=${SLOW_RUNS:-1}
MNT=${SLOW_MNT:-/mnt/bmbench}
OUT=${SLOW_OUT:-/tmp/bulkmove-slowfs.md}
RIG=${BENCH_RIG:-$(cd "$ROOT/.." && pwd)/shared/rig}
HOST=box2
SLOW=${SLOW_FUSE:-/mnt/bulkmove-slowfs} # the FUSE mount point
BACK=$MNT/$(basename "$SLOW") # what it mounts: src/SET and dst/

die() { echo "slowfs: $*" >&2; exit 1; }
note() { echo "slowfs: $*" >&2; }
[[ $(id -u) == 0 ]] || die "needs root (FUSE mounts, the rig's namespaces)"
mkdir -p "$MNT" && { mountpoint -q "$MNT" || mount -t tmpfs -o size=8g tmpfs "$MNT"; }

# slowfs, built from the rig's source.
SLOWFS=/tmp/$(basename "$SLOW")-bin
(cd "$RIG/slowfs" && go build -o "$SLOWFS" .) || die "cannot build $RIG/slowfs"
unmount() { fusermount -u "$SLOW" 2>/dev/null || umount -l "$SLOW" 2>/dev/null || true; }
unmount
rm -rf "$BACK" && mkdir -p "$BACK/src" "$BACK/dst" "$SLOW"
LOG=/tmp/$(basename "$SLOW").log
"$SLOWFS" -delay "$DELAY" "$BACK" "$SLOW" >"$LOG" 2>&1 &
SLOWPID=$!
# (slowfs unmounts on SIGTERM, but stays when the mount is busy: then -9.)
trap 'kill $SLOWPID 2>/dev/null; sleep 0.5; unmount; kill -9 $SLOWPID 2>/dev/null || true' EXIT
for _ in $(seq 50); do mountpoint -q "$SLOW" && break; sleep 0.1; done
mountpoint -q "$SLOW" || die "slowfs did not mount (see $LOG)"

note "generating the datasets"
for set in $SETS; do
	case $set in
	k1) go run "$ROOT/bench/gentree" -kind small -n 1000 -size 100KiB -dirs 10 -o "$BACK/src/k1" -q ;;
	mixed) go run "$ROOT/bench/gentree" -kind mixed -n "$MIXED_N" -o "$BACK/src/mixed" -q ;;
	*) die "unknown dataset $set" ;;
	esac
	# The hand split: every name but directories, round robin over PIPES lists.
	(cd "$BACK/src/$set" && find . ! -type d) >"$BACK/$set.list"
	rm -f "$BACK/$set.part."*
	split -n "r/$PIPES" "$BACK/$set.list" "$BACK/$set.part."
done

if [[ " $MODES " == *" ssh "* ]]; then
	if ! ip netns exec bm-src ssh -o BatchMode=yes -o ConnectTimeout=5 "$HOST" test -d "$SLOW/src" 2>/dev/null; then
		note "(re)starting the rig, so that its sshd sees $SLOW"
		"$RIG/net.sh" down >/dev/null
		"$RIG/net.sh" up >/dev/null
	fi
	ip netns exec bm-src ssh -o BatchMode=yes "$HOST" test -d "$SLOW/src" || die "box2 does not see $SLOW"
	# Untimed: the first push uploads this bulkmove to box2's cache.
	mkdir -p "$BACK/warm" && echo warm >"$BACK/warm/f"
	ip netns exec bm-src "$BULKMOVE" --journal none "$BACK/warm" "$HOST:$BACK/warm-copy" 2>/dev/null || die "a push to $HOST fails"
	rm -rf "$BACK/warm" "$BACK/warm-copy"
fi

now() { date +%s.%N; }
# timed VAR MODE CMD: run the shell command CMD (in the sender's namespace for ssh),
# its seconds in VAR.
timed() {
	local var=$1 mode=$2 cmd=$3 t0 t1 ns=()
	[[ $mode == ssh ]] && ns=(ip netns exec bm-src)
	t0=$(now)
	"${ns[@]}" bash -c "$cmd" >/dev/null 2>"$LOG.err" || { cat "$LOG.err" >&2; die "failed: $cmd"; }
	t1=$(now)
	printf -v "$var" '%.2f' "$(echo "$t1 - $t0" | bc)"
}
best() { printf '%s\n' "$@" | sort -n | head -1; }
ratio() { echo "scale=2; $1 / $2" | bc | sed 's/^\./0./'; }

{
	echo "## bulkmove on a slow filesystem (slowfs, $DELAY per metadata operation)"
	echo
	echo "$(date -u +%FT%TZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs; bulkmove -j $J (--io-concurrency auto); best of $RUNS."
	echo "k1: 1,000 x 100 KiB in 10 directories; mixed: gentree mixed -n $MIXED_N."
	echo
	echo "| slow side | tree | mode | one tar | $PIPES hand-split tars | bulkmove | bulkmove --transport tls | one tar / bulkmove | bulkmove / $PIPES tars |"
	echo "|---|---|---|--:|--:|--:|--:|--:|--:|"
} | tee "$OUT"

for side in $SIDES; do
	for set in $SETS; do
		if [[ $side == src ]]; then s=$SLOW/src/$set; d=$BACK/dst/$set; dl=$d
		else s=$BACK/src/$set; d=$SLOW/dst/$set; dl=$BACK/dst/$set; fi
		for mode in $MODES; do
			reset="rm -rf $dl"
			if [[ $mode == ssh ]]; then
				tar1="tar -C $s -cf - . | ssh $HOST 'mkdir -p $d && tar -C $d -xf -'"
				pipes="for l in $BACK/$set.part.*; do (tar -C $s -cf - -T \$l | ssh $HOST 'mkdir -p $d && tar -C $d -xf -') & done; wait"
				bm="$BULKMOVE -j $J --journal none $s $HOST:$d"
				bmtls="$BULKMOVE -j $J --journal none --transport tls $s $HOST:$d"
			else
				tar1="mkdir -p $d && tar -C $s -cf - . | tar -C $d -xf -"
				pipes="mkdir -p $d && for l in $BACK/$set.part.*; do (tar -C $s -cf - -T \$l | tar -C $d -xf -) & done; wait"
				bm="$BULKMOVE -j $J --journal none $s $d"
				bmtls=""
			fi
			t1s=() tps=() bms=() bts=()
			for ((r = 1; r <= RUNS; r++)); do
				note "$side slow, $set, $mode: run $r of $RUNS"
				$reset; timed t "$mode" "$tar1"; t1s+=("$t")
				$reset; timed t "$mode" "$pipes"; tps+=("$t")
				$reset; timed t "$mode" "$bm"; bms+=("$t")
				if [[ -n $bmtls ]]; then
					go run "$ROOT/bench/treecmp" "$BACK/src/$set" "$dl" >/dev/null || die "bulkmove's copy of $set differs"
					$reset; timed t "$mode" "$bmtls"; bts+=("$t")
				fi
			done
			go run "$ROOT/bench/treecmp" "$BACK/src/$set" "$dl" >/dev/null || die "bulkmove's copy of $set differs"
			$reset
			t1=$(best "${t1s[@]}") tp=$(best "${tps[@]}") b=$(best "${bms[@]}") bt="–" fast=$b
			if ((${#bts[@]} > 0)); then
				bt=$(best "${bts[@]}")
				fast=$(best "$b" "$bt")
				bt="$bt s"
			fi
			echo "| $side | $set | $mode | $t1 s | $tp s | $b s | $bt | $(ratio "$t1" "$fast")x | $(ratio "$fast" "$tp") |" | tee -a "$OUT"
		done
	done
done
echo >>"$OUT"
note "report in $OUT"
