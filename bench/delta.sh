#!/usr/bin/env bash
# bench/delta.sh: changed large files, bulkmove's block delta against a resend and rsync
# (`make bench-delta`; root).
#
# The script makes two hosts of its own (bench/lib/hosts.sh: network namespaces on one
# bridge, box1 at 10.198.0.1 sends, box2 at 10.198.0.2 runs an sshd of its own); the
# shared rig is not touched. The files are random bytes (bench/gentree -kind large, so
# compression cannot stand in for the delta), changed by bench/deltaedit: 1% of each
# file's bytes in 16 runs at random, unaligned offsets, every byte of a run changed, the
# same edits every time (fixed seeds). Every method starts from the same old copy at
# DEST, put back (cp -p, untimed) before each run; the old copy has the old mtime, the new
# file a new one. One interleaved run: each part does DELTA_RUNS rounds, each round runs
# every method of the part once, the order rotated by one each round; medians.
#
#   big     a DELTA_SIZE (1 GiB) file, 1% changed, over the link capped at DELTA_RATE
#           (200mbit, tbf on both hosts' eth0):
#             bm_delta       bulkmove SRC/ box2:DST/     (its defaults: the delta, built in
#                            a copy of DEST's file and renamed over it)
#             bm_inplace     bulkmove --inplace          (the delta, DEST's file patched)
#             bm_whole       bulkmove --whole-file       (the resend)
#             rsync_inplace  rsync -a --inplace over ssh
#             rsync          rsync -a over ssh
#             nc             the file's bytes over one raw TCP stream (nc -N into nc -l,
#                            the listener started before the clock): the link's ceiling
#             floor          bench/floor -hash: SRC's file read and hashed in the delta's
#                            blocks on box1 and DEST's old copy on box2, at once: the
#                            machine's ceiling for finding the changed blocks
#             login          ssh box2 true: one login, which every method over SSH pays
#             carry          ssh box2 'cat >/dev/null' of 1% of the file's size in random
#                            bytes: the changed bytes through one SSH login, sshd's share
#                            of any delta over SSH
#             copy           on box2, each of DEST's old files copied beside itself and the
#                            copy renamed over it (cp, then mv; cp clones where the
#                            filesystem shares blocks, and a tmpfs does not): what building
#                            the new version beside the old and renaming it into place, as
#                            bulkmove's default and rsync's do, costs the filesystem alone
#             bm_tls, bm_tls_inplace  bulkmove --transport tls, without and with --inplace:
#                            the data over the TLS data plane, not through sshd (the agent
#                            started over SSH as always)
#   grow    the edited file grown by 10 MiB at its end, DEST holding the edited file,
#           over the same capped link: bulkmove (its defaults) and rsync -a --inplace
#   images  DELTA_IMAGES (8) files of DELTA_IMAGE_SIZE (256 MiB), each changed 1% the
#           same way, over the uncapped link (veth, about 10 Gbit/s): bulkmove (its
#           defaults) and rsync -a, bulkmove --inplace and rsync -a --inplace, the floor,
#           the SSH carriage and the copy as above, and bulkmove over TLS as above
#
# bulkmove runs with --journal none (each run starts afresh). For each run: wall time;
# bytes on the wire, counted by the kernel on box1's eth0 (rx + tx, so both directions,
# headers and acknowledgements included); whole-machine busy CPU-s (/proc/stat, as
# bench/cpu.sh: both ends, sshd, the kernel's network work, and anything else running);
# the CPU-s of this script's processes alone (a cpuacct cgroup holding the script and
# box2's sshd, so both ends, sshd and ssh, not the rest of the machine); and whether
# DEST then equals SRC (cmp, untimed). Every run goes to DELTA_OUT/runs.tsv, each
# command's output to DELTA_OUT/logs, the report to stdout and DELTA_OUT/report.md.
#
# Targets (medians): big: bulkmove's bytes on the wire ≤ 3% of the file, its time ≤ 0.2×
# the resend's, its CPU-s ≤ 1/3 of rsync's and, with --inplace both, of rsync --inplace's
# (each judged against the rsync that writes the file the same way); grow: its bytes on
# the wire ≤ 1.1× the 10 MiB tail (the wire's headers and acknowledgements are under 1%:
# the veth carries segments of up to 64 KiB);
# images: its wall time ≤ 0.25× rsync's, its CPU-s ≤ 1/3 of rsync's (and so with
# --inplace both). The TLS rows are judged against the same targets, on their own lines.
# Beside the targets, the least any copier over SSH spends: the floor plus the carriage
# (which holds a login), and with the copy, the least any delta that builds the new version
# beside the old spends; on this machine's CPUs, no pass takes less time than that least
# CPU-s spread over all of them. The CPU targets are
# judged on the whole machine's CPU-s; the processes' figure is given beside it, and
# holds better when others load the machine.
#
# Environment (all optional):
#   BULKMOVE          bulkmove binary (default ./bin/bulkmove of this repository)
#   DELTA_RUNS        rounds of each part (default 5: writing new pages costs this
#                     machine from 1× to 2× as much from one round to the next)
#   DELTA_PARTS       which parts, in this order (default "big grow images")
#   DELTA_SIZE        the big file (default 1GiB)      DELTA_RATE  its link (default 200mbit)
#   DELTA_IMAGES      number of images (default 8)     DELTA_IMAGE_SIZE  each (default 256MiB)
#   DELTA_DIR         a tmpfs; the files go in DELTA_DIR/bench-delta, removed at the end
#                     (default /mnt/x)
#   DELTA_OUT         report.md, runs.tsv, logs (default /tmp/bench-delta; an earlier
#                     run's files there are removed first)
#   DELTA_NC_PORT     the nc listener's port (default 47300)
#   DELTA_BM_FLAGS    more flags for every bulkmove row (default none; e.g. --split-size 2GiB)

set -uo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
RUNS=${DELTA_RUNS:-5}
PARTS=${DELTA_PARTS:-big grow images}
SIZE=${DELTA_SIZE:-1GiB}
RATE=${DELTA_RATE:-200mbit}
IMAGES=${DELTA_IMAGES:-8}
IMAGE_SIZE=${DELTA_IMAGE_SIZE:-256MiB}
DIR=${DELTA_DIR:-/mnt/x}
W=$DIR/bench-delta # everything this script writes there, removed at the end
OUT=${DELTA_OUT:-/tmp/bench-delta}
NC_PORT=${DELTA_NC_PORT:-47300}
BM_FLAGS=${DELTA_BM_FLAGS:-}
GROW=$((10 << 20))
HZ=$(getconf CLK_TCK)
CG=/sys/fs/cgroup/cpuacct/bench-delta-$$

. "$ROOT/bench/lib/measure.sh"
. "$ROOT/bench/lib/hosts.sh"

note() { printf 'delta: %s\n' "$*" >&2; }
die() {
	printf 'delta: error: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }
B1() { ip netns exec "${NS[box1]}" "$@"; }
B2() { ip netns exec "${NS[box2]}" "$@"; }

# ---------------------------------------------------------------- the methods
# Each copies the directory $SRC into $DST (box2's path; the hosts share this filesystem).

declare -A LABEL=(
	[bm_delta]="bulkmove (its defaults: the delta)"
	[bm_inplace]="bulkmove --inplace (the delta, DEST's file patched)"
	[bm_whole]="bulkmove --whole-file (the resend)"
	[rsync_inplace]="rsync -a --inplace"
	[rsync]="rsync -a"
	[nc]="nc: raw TCP, the file's bytes"
	[floor]="floor: both ends' reading and hashing alone"
	[img_floor]="floor: both ends' reading and hashing alone"
	[login]="ssh box2 true: one login"
	[carry]="ssh box2 'cat >/dev/null': 1% of the file through SSH"
	[img_carry]="ssh box2 'cat >/dev/null': 1% of the images through SSH"
	[copy]="cp and mv on box2: DEST's file copied beside itself, renamed over it"
	[img_copy]="cp and mv on box2: DEST's files copied beside themselves, renamed over them"
	[bm_tls]="bulkmove --transport tls (the delta)"
	[bm_tls_inplace]="bulkmove --transport tls --inplace"
	[img_bm_tls]="bulkmove --transport tls"
	[img_bm_tls_inplace]="bulkmove --transport tls --inplace"
	[grow_bm]="bulkmove (its defaults)"
	[grow_rsync_inplace]="rsync -a --inplace"
	[img_bm]="bulkmove (its defaults)"
	[img_rsync]="rsync -a"
	[img_bm_inplace]="bulkmove --inplace"
	[img_rsync_inplace]="rsync -a --inplace"
)
declare -A METHODS=(
	[big]="bm_delta bm_inplace bm_whole rsync_inplace rsync nc floor login carry copy bm_tls bm_tls_inplace"
	[grow]="grow_bm grow_rsync_inplace"
	[images]="img_bm img_rsync img_bm_inplace img_rsync_inplace img_floor img_carry img_copy img_bm_tls img_bm_tls_inplace"
)

bm() { B1 "$BULKMOVE" --ssh-config "$HOSTS_DIR/ssh_config" --journal none $BM_FLAGS "$@" "$SRC/" "box2:$DST/"; }
rs() { B1 rsync -a "$@" -e "ssh -F $HOSTS_DIR/ssh_config" "$SRC/" "box2:$DST/"; }
m_bm_delta() { bm; }
m_bm_inplace() { bm --inplace; }
m_bm_whole() { bm $WHOLE; }
m_rsync_inplace() { rs --inplace; }
m_rsync() { rs; }
m_grow_bm() { bm; }
m_grow_rsync_inplace() { rs --inplace; }
m_img_bm() { bm; }
m_img_rsync() { rs; }
m_img_bm_inplace() { bm --inplace; }
m_bm_tls() { bm --transport tls; }
m_bm_tls_inplace() { bm --transport tls --inplace; }
m_img_bm_tls() { bm --transport tls; }
m_img_bm_tls_inplace() { bm --transport tls --inplace; }
# The carriage: the part's changed bytes (CARRY, random, made by the part) through one
# login's SSH channel to nothing: what sshd and ssh cost any delta over SSH.
m_carry() { B1 ssh -F "$HOSTS_DIR/ssh_config" box2 'cat >/dev/null' <"$CARRY"; }
m_img_carry() { m_carry; }
# The copy: DEST's old files (put back before the run, as for every method) each copied
# beside itself and renamed over itself, on box2: the filesystem's share of a delta that
# keeps the old version whole until the new one is complete (writing every page of the
# new version, unless the filesystem clones, and dropping the old version's).
m_copy() {
	local f
	for f in "$DST"/*; do
		B2 cp "$f" "$f.bm-copy" && B2 mv "$f.bm-copy" "$f" || return 1
	done
}
m_img_copy() { m_copy; }
# ceiling METHOD: whether the method is one of the machine's ceilings, not a copier (its
# DEST is not checked).
ceiling() { [[ $1 == nc || $1 == *floor || $1 == login || $1 == *carry || $1 == *copy ]]; }
m_img_rsync_inplace() { rs --inplace; }
# The floor: bench/floor -hash on each host at once, SRC's files on box1 and DEST's old
# copies on box2, each read whole and hashed in the delta's blocks, one thread each: the
# least either end can do to find the changed blocks, and the two at once the least time.
m_floor() {
	local a b
	B1 "$W/bin/floor" -hash "$SRC" &
	a=$!
	B2 "$W/bin/floor" -hash "$DST" &
	b=$!
	wait "$a" && wait "$b"
}
m_img_floor() { m_floor; }
m_login() { B1 ssh -F "$HOSTS_DIR/ssh_config" box2 true; }
NC_PID=
pre_nc() {
	# Not through B2: $! must be nc itself, in box2's namespace, for listening.
	ip netns exec "${NS[box2]}" nc -l 10.198.0.2 "$NC_PORT" >/dev/null 2>&1 &
	NC_PID=$!
	listening "$NC_PORT" "$NC_PID"
}
m_nc() {
	local rc
	B1 nc -N 10.198.0.2 "$NC_PORT" <"$SRC/$(ls "$SRC" | head -n1)"
	rc=$?
	((rc == 0)) || kill "$NC_PID" 2>/dev/null
	wait "$NC_PID" || rc=1
	NC_PID=
	return $rc
}

cg_ns() { if [[ -r $CG/cpuacct.usage ]]; then cat "$CG/cpuacct.usage"; else echo 0; fi; }

# measure METHOD ROUND: put DEST's old copy back, run the method, set M_* (wall s,
# machine CPU-s, processes' CPU-s, wire bytes, DEST's check).
measure() {
	local m=$1 tag=$2 log=$OUT/logs/$2-$1.log
	rm -rf "$DST" && cp -a "$OLD" "$DST" || die "cannot put $OLD back at $DST"
	if [[ $m == nc ]] && ! pre_nc; then
		kill "$NC_PID" 2>/dev/null
		NC_PID=
		return 1
	fi
	local t0 c0 p0 b0 t1 c1 p1 b1 rc
	b0=$(host_bytes box1) p0=$(cg_ns) c0=$(busy_ticks) t0=$(now_us)
	"m_$m" >"$log" 2>&1
	rc=$?
	t1=$(now_us) c1=$(busy_ticks) p1=$(cg_ns) b1=$(host_bytes box1)
	if ((rc != 0)); then
		note "$tag $m failed (exit $rc; see $log)"
		return 1
	fi
	M_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
	M_CPU=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
	M_PCPU=$(awk -v a="$p0" -v b="$p1" 'BEGIN { if (b == 0) print "–"; else printf "%.2f", (b - a) / 1e9 }')
	M_BYTES=$((b1 - b0))
	M_CHECK=–
	if ! ceiling "$m"; then
		M_CHECK=same
		diff -rq "$SRC" "$DST" >>"$log" 2>&1 || M_CHECK=DIFFERS
		[[ $M_CHECK == same ]] || note "$tag $m: DEST differs from SRC after the run (see $log)"
	fi
	note "$tag $m: $M_WALL s, $M_BYTES bytes on the wire, $M_CPU CPU-s (processes $M_PCPU), DEST $M_CHECK"
}

declare -A WALL CPU PCPU BYTES CHECK

record() {
	WALL[$1.$2]=$M_WALL CPU[$1.$2]=$M_CPU PCPU[$1.$2]=$M_PCPU BYTES[$1.$2]=$M_BYTES
	[[ $M_CHECK == same || $M_CHECK == – ]] || CHECK[$1]=DIFFERS
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "$M_WALL" "$M_CPU" "$M_PCPU" "$M_BYTES" "$M_CHECK" >>"$OUT/runs.tsv"
}

# rounds PART: DELTA_RUNS rounds of the part's methods, the order rotated each round.
rounds() {
	local ms r i m nm
	read -ra ms <<<"${METHODS[$1]}"
	nm=${#ms[@]}
	for ((r = 1; r <= RUNS; r++)); do
		for ((i = 0; i < nm; i++)); do
			m=${ms[(i + r - 1) % nm]}
			measure "$m" "r$r" && record "$m" "$r"
		done
	done
	rm -rf "$DST"
}

med() {
	local -n a=$1
	local r
	for ((r = 1; r <= RUNS; r++)); do [[ -n ${a[$2.$r]:-} ]] && echo "${a[$2.$r]}"; done | median
}

# ---------------------------------------------------------------- set-up

setup() {
	[[ $(id -u) == 0 ]] || die "needs root (network namespaces, tc, a cgroup)"
	[[ -x $BULKMOVE ]] || die "no bulkmove at $BULKMOVE (make build, or set BULKMOVE)"
	[[ $RUNS =~ ^[1-9][0-9]*$ && $IMAGES =~ ^[1-9][0-9]*$ ]] || die "DELTA_RUNS and DELTA_IMAGES must be positive numbers"
	local t p
	for t in rsync nc ssh sshd tc go cmp; do have "$t" || [[ $t == sshd && -x /usr/sbin/sshd ]] || die "$t is missing"; done
	nc -h 2>&1 | grep -q OpenBSD || die "nc is not OpenBSD netcat (apt-get install -y netcat-openbsd)"
	for p in $PARTS; do [[ -n ${METHODS[$p]:-} ]] || die "DELTA_PARTS: no part $p (big, grow, images)"; done
	case $OUT in / | "$ROOT" | "$ROOT"/* | "$DIR" | "$DIR"/*) die "DELTA_OUT must be outside the repository and DELTA_DIR" ;; esac
	rm -rf "$OUT"/{logs,report.md,runs.tsv,edits.txt} "$W"
	mkdir -p "$OUT/logs" "$W/bin" || die "cannot write $OUT and $W"
	[[ $(stat -f -c %T "$W" 2>/dev/null) == tmpfs ]] || note "warning: $DIR is not on a tmpfs"
	# The runs write new pages of the tmpfs (a whole partial, for a split file): short of
	# free memory, the kernel reclaims as they are allocated, and that work is counted
	# against whichever method writes most (2.4× the CPU-s of a grown file's update here).
	local avail
	avail=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
	[[ -z $avail ]] || ((avail >= 12)) || note "warning: only $avail GiB of memory available (12 wanted): the figures will count the kernel's reclaim"
	(cd "$ROOT" && go build -o "$W/bin/gentree" ./bench/gentree && go build -o "$W/bin/deltaedit" ./bench/deltaedit &&
		go build -o "$W/bin/floor" ./bench/floor) ||
		die "cannot build bench/gentree, bench/deltaedit and bench/floor"
	# The delta's flags: until bulkmove has them, its default is a resend and so is the
	# --whole-file row (run without the flag), and the report says so.
	HELP=$("$BULKMOVE" --help 2>&1)
	WHOLE=--whole-file HAS_DELTA=1
	grep -q -- --whole-file <<<"$HELP" || WHOLE=
	grep -q -- --delta-min <<<"$HELP" || HAS_DELTA=0
	VERSION=$("$BULKMOVE" --version 2>/dev/null | head -n1)
	REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
	LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	# The processes' CPU-s: this script in a cpuacct cgroup before box2's sshd starts, so
	# the sshd and every command run from here are in it too.
	if mkdir "$CG" 2>/dev/null && echo $$ >"$CG/tasks"; then :; else
		note "no cpuacct cgroup ($CG): the processes' CPU-s are left out"
		CG=
	fi
	hosts_up "$W" box1 box2+ssh || die "cannot make the two hosts"
	timeout 20 ip netns exec "${NS[box1]}" ssh -F "$HOSTS_DIR/ssh_config" -o BatchMode=yes box2 true </dev/null ||
		die "ssh box2 from box1 fails"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $NC_PID ]] && kill "$NC_PID" 2>/dev/null
	hosts_down
	if [[ -n $CG && -d $CG ]]; then
		echo $$ >/sys/fs/cgroup/cpuacct/tasks 2>/dev/null
		rmdir "$CG" 2>/dev/null
	fi
	rm -rf "${W:?}"
	exit "$rc"
}

# ---------------------------------------------------------------- the parts

gen_big() {
	[[ -f $W/old/large-000.bin ]] && return
	"$W/bin/gentree" -q -kind large -n 1 -size "$SIZE" -o "$W/old" || die "gentree failed"
	cp -a "$W/old" "$W/new" && "$W/bin/deltaedit" -frac 0.01 -runs 16 -seed 1 "$W/new/large-000.bin" 2>>"$OUT/edits.txt" ||
		die "deltaedit failed"
	SIZE_B=$(stat -c %s "$W/old/large-000.bin")
}

part_big() {
	gen_big
	SRC=$W/new OLD=$W/old DST=$W/dst
	CARRY=$W/carry
	head -c $((SIZE_B / 100)) /dev/urandom >"$CARRY" || die "cannot write $CARRY"
	host_cap box1 "$RATE" && host_cap box2 "$RATE" || die "tc: cannot cap the link at $RATE"
	rounds big
}

part_grow() {
	gen_big
	rm -rf "$W/grown"
	cp -a "$W/new" "$W/grown" && "$W/bin/deltaedit" -grow $GROW -seed 2 "$W/grown/large-000.bin" 2>>"$OUT/edits.txt" ||
		die "deltaedit -grow failed"
	SRC=$W/grown OLD=$W/new DST=$W/dst
	host_cap box1 "$RATE" && host_cap box2 "$RATE" || die "tc: cannot cap the link at $RATE"
	rounds grow
	rm -rf "$W/grown"
}

part_images() {
	rm -rf "$W/old" "$W/new" # room for the images
	"$W/bin/gentree" -q -kind large -n "$IMAGES" -size "$IMAGE_SIZE" -o "$W/iold" || die "gentree failed"
	IMAGE_B=$(stat -c %s "$W/iold/large-000.bin")
	cp -a "$W/iold" "$W/inew" && "$W/bin/deltaedit" -frac 0.01 -runs 16 -seed 3 "$W"/inew/*.bin 2>>"$OUT/edits.txt" ||
		die "deltaedit failed"
	SRC=$W/inew OLD=$W/iold DST=$W/dst
	CARRY=$W/carry
	head -c $((IMAGES * IMAGE_B / 100)) /dev/urandom >"$CARRY" || die "cannot write $CARRY"
	host_uncap box1
	host_uncap box2
	rounds images
	rm -rf "$W/iold" "$W/inew"
}

# ---------------------------------------------------------------- the report

out() { printf '%s\n' "$@" | tee -a "$OUT/report.md"; }
# verdict X LIMIT: PASS when the median X is at most LIMIT.
verdict() { if [[ $1 == – ]]; then echo "not judged (no figures)"; elif le "$1" "$2"; then echo PASS; else echo FAIL; fi; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "–" || b <= 0) print "–"; else printf "%.2f%%", 100 * a / b }'; }

# floor_line FLOOR-WALL FLOOR-CPU BM-WALL BM-CPU RSYNC-CPU RSYNC-WALL LOGIN-CPU (CPU-s: the
# processes'; RSYNC-WALL may be empty; LOGIN-CPU "–" where the part has no login row): the
# machine's own ceiling for the work (the floor, and with one SSH login, which every method
# over SSH pays), bulkmove's share of it, and where the targets stand against it.
floor_line() {
	[[ $1 == – || $3 == – ]] && return
	local s="The machine's ceiling: reading and hashing both ends' files alone (bench/floor -hash, one thread an end, at once) took $1 s and $2 CPU-s (processes'), $(ratio "$2" "$5")× rsync --inplace's CPU-s"
	[[ -n $6 ]] && s+=" and $(ratio "$1" "$6")× its time"
	s+="; bulkmove --inplace reached $(ratio "$1" "$3")× the floor's speed and $(ratio "$2" "$4")× its CPU economy."
	if [[ -n $7 && $7 != – ]]; then
		local both
		both=$(awk -v a="$2" -v b="$7" 'BEGIN { printf "%.2f", a + b }')
		s+=" One SSH login (\`ssh box2 true\`, its shell's start-up files) took $7 CPU-s: with it, the least any copier over SSH spends is $both CPU-s, $(ratio "$both" "$5")× rsync --inplace's, against a target of 0.33×; bulkmove --inplace spent $(ratio "$4" "$both")× that least."
	fi
	out "" "$s"
}

# carry_line FLOOR-CPU CARRY-CPU BM-INPLACE-CPU RSYNC-INPLACE-CPU [RSYNC-INPLACE-WALL
# BM-INPLACE-WALL] (CPU-s: the processes'): the least any copier over SSH spends, the floor
# plus the changed bytes carried through one login's SSH channel, and bulkmove --inplace's
# share of it; with the walls, the least time that allows (least_time).
carry_line() {
	[[ $1 == – || $2 == – ]] && return
	local least
	least=$(awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a + b }')
	out "" "Carrying the changed bytes (1%, random) through one SSH login to nothing (\`ssh box2 'cat >/dev/null'\`: sshd, ssh and the login) took $2 CPU-s: with the floor, the least any delta over SSH spends is $least CPU-s, $(ratio "$least" "$4")× rsync --inplace's, against a target of 0.33×; bulkmove --inplace spent $(ratio "$3" "$least")× that least.$(least_time "$least" "${5:-}" "${6:-}")"
}

# least_time LEAST-CPU RSYNC-WALL BM-WALL: " " and a sentence: the least time LEAST-CPU
# CPU-s allow on this machine's CPUs (all of them busy), against rsync's time and its
# 0.25× target, and bulkmove's; nothing without RSYNC-WALL.
least_time() {
	[[ -z $2 || $2 == – ]] && return
	local cpus t
	cpus=$(nproc)
	t=$(awk -v a="$1" -v n="$cpus" 'BEGIN { printf "%.2f", a / n }')
	echo " Spread over this machine's $cpus CPUs, that least takes at least $t s, $(ratio "$t" "$2")× rsync's time, against a target of 0.25×; bulkmove took $(ratio "$3" "$2")× rsync's time."
}

# copy_line FLOOR-CPU CARRY-CPU COPY-CPU BM-CPU RSYNC-CPU [RSYNC-WALL BM-WALL] (CPU-s:
# the processes'): the least any delta over SSH that builds the new version beside the old
# spends, the floor, the carriage and the copy, and bulkmove's (its defaults) share of it;
# with the walls, the least time that allows (least_time).
copy_line() {
	[[ $1 == – || $2 == – || $3 == – ]] && return
	local least
	least=$(awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f", a + b + c }')
	out "" "Copying DEST's old files beside themselves and renaming the copies over them (\`cp\`, \`mv\` on box2: what building the new version beside the old costs the filesystem alone) took $3 CPU-s: with the floor and the carriage, the least any delta over SSH that keeps the old version whole until the new one is complete spends $least CPU-s, $(ratio "$least" "$5")× rsync's, against a target of 0.33×; bulkmove (its defaults) spent $(ratio "$4" "$least")× that least.$(least_time "$least" "${6:-}" "${7:-}")"
}

# cpu_target TEXT BM RSYNC, wall_target TEXT BM RSYNC: a target's row, method BM's
# median CPU-s (at most 1/3) or wall time (at most 0.25×) against method RSYNC's.
cpu_target() {
	local c p
	c=$(ratio "$(med CPU "$2")" "$(med CPU "$3")") p=$(ratio "$(med PCPU "$2")" "$(med PCPU "$3")")
	out "| $1 | ${c}× (processes: ${p}×) | $(verdict "$c" 0.3334) |"
}
wall_target() {
	local w
	w=$(ratio "$(med WALL "$2")" "$(med WALL "$3")")
	out "| $1 | ${w}× | $(verdict "$w" 0.25) |"
}

table() { # table PART DENOMINATOR-BYTES DENOMINATOR-NAME
	out "" "| method | wall s | bytes on the wire | ÷ $3 | CPU-s (machine) | CPU-s (processes) | DEST = SRC |" "|---|--:|--:|--:|--:|--:|---|"
	local m b
	for m in ${METHODS[$1]}; do
		b=$(med BYTES "$m")
		out "| \`${LABEL[$m]}\` | $(med WALL "$m") | ${b%.00} | $(pct "$b" "$2") | $(med CPU "$m") | $(med PCPU "$m") | $(ceiling "$m" && echo – || echo "${CHECK[$m]:-yes}") |"
	done
}

report() {
	: >"$OUT/report.md"
	out "## bulkmove's block delta, $(date -u '+%Y-%m-%d %H:%M UTC')" ""
	out "- command: \`$(env | grep -E '^(DELTA_|BULKMOVE=)' | sort | tr '\n' ' ')bench/delta.sh\`"
	out "- machine: $(uname -srm), $(nproc) CPUs; load average at start $LOAD0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	out "- bulkmove: $VERSION, repository at commit $REV; $(rsync --version | head -n1 | sed 's/  */ /g'), $(ssh -V 2>&1 | cut -d, -f1)"
	out "- two hosts of the script's own (network namespaces, box2 with its own sshd); random bytes (gentree -kind large), 1% of each file changed in 16 runs at random unaligned offsets (deltaedit; $OUT/edits.txt); $RUNS interleaved rounds, medians; bytes on the wire: box1's eth0, rx + tx"
	((HAS_DELTA)) || out "- **this bulkmove has no --delta-min: its default is a resend, not a delta**"
	[[ -n $WHOLE ]] || out "- this bulkmove has no --whole-file: the resend row runs with its defaults"
	local w d rw
	if [[ " $PARTS " == *" big "* ]]; then
		out "" "### $SIZE_B bytes, 1% changed, over $RATE"
		table big "$SIZE_B" "file"
		w=$(med WALL bm_delta) d=$(med BYTES bm_delta)
		rw=$(ratio "$w" "$(med WALL bm_whole)")
		out "" "| target | measured | result |" "|---|--:|---|"
		out "| bulkmove's bytes on the wire ≤ 3% of the file | $(pct "$d" "$SIZE_B") | $(verdict "$(pct "$d" "$SIZE_B" | tr -d %)" 3) |"
		out "| bulkmove's time ≤ 0.2× the resend's | ${rw}× | $(verdict "$rw" 0.2) |"
		cpu_target "bulkmove --inplace's CPU-s ≤ 1/3 of rsync --inplace's" bm_inplace rsync_inplace
		cpu_target "bulkmove's CPU-s ≤ 1/3 of rsync's" bm_delta rsync
		local nw rate
		nw=$(med WALL nc)
		rate=$(awk -v b="$SIZE_B" -v t="$nw" 'BEGIN { if (t == "–" || t <= 0) print "–"; else printf "%.0f", b * 8 / t / 1e6 }')
		cpu_target "over TLS: bulkmove --transport tls --inplace's CPU-s ≤ 1/3 of rsync --inplace's" bm_tls_inplace rsync_inplace
		cpu_target "over TLS: bulkmove --transport tls's CPU-s ≤ 1/3 of rsync's" bm_tls rsync
		floor_line "$(med WALL floor)" "$(med PCPU floor)" "$(med WALL bm_inplace)" "$(med PCPU bm_inplace)" "$(med PCPU rsync_inplace)" "" "$(med PCPU login)"
		carry_line "$(med PCPU floor)" "$(med PCPU carry)" "$(med PCPU bm_inplace)" "$(med PCPU rsync_inplace)"
		copy_line "$(med PCPU floor)" "$(med PCPU carry)" "$(med PCPU copy)" "$(med PCPU bm_delta)" "$(med PCPU rsync)"
		out "" "The link's ceiling: one raw TCP stream carried the file's bytes in $nw s ($rate Mbit/s of the nominal $RATE); the resend took $(ratio "$(med WALL bm_whole)" "$nw")× that time."
	fi
	if [[ " $PARTS " == *" grow "* ]]; then
		out "" "### The edited file grown by $GROW bytes at its end, over $RATE"
		table grow "$GROW" "the tail"
		d=$(ratio "$(med BYTES grow_bm)" "$GROW")
		out "" "| target | measured | result |" "|---|--:|---|"
		out "| bulkmove's bytes on the wire ≤ 1.1× the tail (only the tail moves) | ${d}× | $(verdict "$d" 1.1) |"
	fi
	if [[ " $PARTS " == *" images "* ]]; then
		out "" "### $IMAGES images of $IMAGE_B bytes, each 1% changed, uncapped link"
		table images "$((IMAGES * IMAGE_B))" "the images"
		out "" "| target | measured | result |" "|---|--:|---|"
		wall_target "bulkmove's wall time ≤ 0.25× rsync's" img_bm img_rsync
		cpu_target "bulkmove's CPU-s ≤ 1/3 of rsync's" img_bm img_rsync
		wall_target "bulkmove --inplace's wall time ≤ 0.25× rsync --inplace's" img_bm_inplace img_rsync_inplace
		cpu_target "bulkmove --inplace's CPU-s ≤ 1/3 of rsync --inplace's" img_bm_inplace img_rsync_inplace
		wall_target "over TLS: bulkmove --transport tls's wall time ≤ 0.25× rsync's" img_bm_tls img_rsync
		cpu_target "over TLS: bulkmove --transport tls's CPU-s ≤ 1/3 of rsync's" img_bm_tls img_rsync
		wall_target "over TLS: bulkmove --transport tls --inplace's wall time ≤ 0.25× rsync --inplace's" img_bm_tls_inplace img_rsync_inplace
		cpu_target "over TLS: bulkmove --transport tls --inplace's CPU-s ≤ 1/3 of rsync --inplace's" img_bm_tls_inplace img_rsync_inplace
		floor_line "$(med WALL img_floor)" "$(med PCPU img_floor)" "$(med WALL img_bm_inplace)" "$(med PCPU img_bm_inplace)" "$(med PCPU img_rsync_inplace)" "$(med WALL img_rsync_inplace)" "$(med PCPU login)"
		carry_line "$(med PCPU img_floor)" "$(med PCPU img_carry)" "$(med PCPU img_bm_inplace)" "$(med PCPU img_rsync_inplace)" "$(med WALL img_rsync_inplace)" "$(med WALL img_bm_inplace)"
		copy_line "$(med PCPU img_floor)" "$(med PCPU img_carry)" "$(med PCPU img_copy)" "$(med PCPU img_bm)" "$(med PCPU img_rsync)" "$(med WALL img_rsync)" "$(med WALL img_bm)"
	fi
	out "" "CPU-s (machine): whole-machine busy CPU-s from /proc/stat, the targets' measure; CPU-s (processes): this run's processes alone (a cpuacct cgroup: both ends, sshd, ssh), which others' load does not reach. Every run: $OUT/runs.tsv (round, method, wall s, CPU-s machine, CPU-s processes, bytes on the wire, DEST); each command's output in $OUT/logs." ""
}

main() {
	trap cleanup EXIT
	setup
	trap 'exit 130' INT
	trap 'exit 143' TERM
	local p
	for p in $PARTS; do
		note "part $p; load average $(cut -d' ' -f1-3 /proc/loadavg)"
		"part_$p"
	done
	report
}

main "$@"
