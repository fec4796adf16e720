#!/usr/bin/env bash
# bench/speed.sh: the speed table (`make bench-speed`, also run by `make bench`).
#
# Seven regimes over the test hosts of ../shared/rig, bulkmove and its peers in the
# same run, SPEED_RUNS rounds (one by default; each round runs a regime's methods in
# turn, the medians are reported), trees on a tmpfs (SPEED_MNT):
#
#   small  CPU-bound small files: direct link, 100,000 × 1 KiB.
#          tar | ssh (reference), tar | nc, rsync -a; bulkmove (SSH streams), bulkmove
#          --transport tls. Targets: SSH ≤ 0.7× tar | ssh's time, TLS ≤ 1.0× tar | nc's.
#   large  CPU-bound large files: direct link, 4 × 512 MiB.
#          tar | ssh (reference), tar | nc; bulkmove, bulkmove --transport tls, and
#          (no target) --transport tcp --no-verify-transfer: bodies by sendfile and splice.
#          Targets: SSH ≥ 1.5× tar | ssh's throughput, TLS ≥ 2× tar | ssh's.
#   slow   slow link: `net.sh up 200mbit`, bench/gentree's mixed tree.
#          tar | zstd -1 | ssh (reference), tar | ssh, rsync -az; bulkmove (--compress
#          auto, the default), and bulkmove --compress none for comparison.
#          Target: auto ≤ 0.95× tar | zstd -1 | ssh's time.
#   slowh  the same link, gentree's half tree (the mixed layout, every file half random
#          bytes and half a repeated line, 404 MB; zstd -1 halves it): tar | zstd -1 |
#          ssh (reference), tar | ssh; bulkmove. Target: ≤ 1.02× tar | zstd -1 | ssh's time.
#   slowr  the same link, gentree's random tree (mixed layout and sizes, random bytes):
#          tar | ssh (reference), tar | zstd -1 | ssh; bulkmove. Target: ≤ 1.02× tar | ssh's.
#   slowz  (only when named in SPEED_REGIMES) the same on the mixed tree turned into hex:
#          every file's bytes replaced by the hex digits of its first half (python3), sizes
#          and mtimes kept; zstd -1 reaches the entropy floor there (0.5), so no level can
#          send fewer bytes. Same target.
#   wan    long path: `net.sh wan 50ms 400mbit` (host wan2), the half tree (as slowh).
#          First the ceiling: SPEED_RAW_STREAMS (8) raw TCP streams (nc, listeners in
#          bm-dst writing to /dev/null, started before the clock) carrying the tree's file
#          bytes between them (zeros: nothing on the path compresses); then tar | ssh,
#          SPEED_PIPES (6) × tar | ssh (the file list dealt round robin beforehand,
#          untimed), fpsync -n SPEED_PIPES (package fpart; skipped with a note if
#          missing); bulkmove -j auto, -j 8, and -j auto with --transport tls. Every row
#          is judged against the raw streams (speed × ref: its share of that ceiling); the
#          notes give each row's share of the nominal rate too.
#          Target: -j auto and -j 8 ≥ 0.95× the raw streams' speed.
#   huge   huge + small: direct link, one 4 GiB file + 100,000 × 1 KiB.
#          tar | ssh (reference); an mscp-style split: SPEED_SPLIT (4) ssh pipes, pipe i
#          carrying the i-th byte range of the big file (dd, written in place at its
#          offset) and then the i-th quarter of the small files (tar); bulkmove, and
#          bulkmove --transport tls. Target (bulkmove over SSH): ≥ 1.5× tar | ssh's
#          throughput, and all streams busy to the end: every stream's "busy until"
#          (bulkmove -v) at least 90% of the last one's (streams that -j auto retired
#          before the end, "auto: 8 -> 4 streams", are left out).
#
# bulkmove runs with its defaults (-j auto, --compress auto, --split-size auto) plus -v
# (for the per-stream "busy until" lines) and --remote-bulkmove BULKMOVE (box2 shares
# this machine's filesystem, so no upload is timed). Its copies are checked with
# bench/treecmp (untimed; strict: content, modes, nanosecond mtimes, links, owners).
# The peers' copies are only counted (files, bytes), unless SPEED_VERIFY=all. Before
# each regime's first timed run, one untimed `cp -a` of the source touches the tmpfs
# pages the copies will use (as bench/run.sh). The datasets are deleted after each regime.
#
# The rig: the script brings it to the state each regime needs (net.sh down; net.sh up
# [RATE], net.sh wan ...), so it must not be in use by anyone else, and restores it at
# the end: net.sh up without a rate cap, and no wanem. Timings are meaningful only on a
# quiet machine: the script prints the load average at the start of each regime.
#
# Environment (all optional):
#   BULKMOVE        bulkmove binary (default ./bin/bulkmove of this repository)
#   SPEED_SCALE     full (default) or small: 1,000 files, 4 × 8 MiB, 1,000-file mixed
#                   tree, 64 MiB + 1,000 files (to try the script; times mean nothing)
#   SPEED_REGIMES   which, in the order run (default "small large huge wan slow slowh slowr": the
#                   direct-link ones first, so the rig is restarted least); the table is
#                   in the issue's order
#   SPEED_MNT       tmpfs for the trees (default /mnt/bmbench; mounted, 8g, if it is not a
#                   mount point). If it cannot hold a regime's source and copy, the source
#                   goes to SPEED_SPARE (default /dev/shm) when that is a tmpfs with room
#                   (said in the notes), else the regime is skipped
#   SPEED_OUT       the report, Markdown (default /tmp/bulkmove-speed.md)
#   SPEED_LOGS      every run's output (default /tmp/bulkmove-speed-logs, emptied first)
#   SPEED_RIG       manage (default) or keep: never touch the rig (to try the script while
#                   others use it: slow then runs uncapped, wan only if wanem is up)
#   SPEED_SLOW_RATE the slow link (default 200mbit)
#   SPEED_WAN       the long path as `net.sh wan` takes it (default "50ms 400mbit")
#   SPEED_PIPES     hand-split tar pipes and fpsync jobs in wan (default 6)
#   SPEED_SPLIT     pipes of the mscp-style split in huge (default 4)
#   SPEED_NC_PORT   first port of tar | nc's listener in bm-dst (default 47100; the raw
#                   streams' from SPEED_NC_PORT + 500)
#   SPEED_RAW_STREAMS raw TCP streams of wan's ceiling (default 8)
#   SPEED_JFIXED    also run bulkmove over SSH streams at each of these fixed -j (e.g.
#                   "2 4 8 16"), and judge -j auto against the best of them (the target: at
#                   least 90% of its throughput, each regime); default: not run
#   SPEED_RUNS      rounds of each regime (default 1): its methods run in turn, round after
#                   round, and each row reports its median time and CPU-s
#   SPEED_VERIFY    bulkmove (default): treecmp bulkmove's copies, count the peers' files
#                   and bytes; all: also compare the peers' names, types and content
#   BENCH_RIG       the rig's directory (default ../shared/rig next to this repository)
#
# Exit status: 0 when every run finished and bulkmove's copies verified (targets missed
# are reported, not an error), 1 otherwise.

set -uo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
SCALE=${SPEED_SCALE:-full}
REGIMES=${SPEED_REGIMES:-small large huge wan slow slowh slowr}
MNT=${SPEED_MNT:-/mnt/bmbench}
OUT=${SPEED_OUT:-/tmp/bulkmove-speed.md}
JFIXED=${SPEED_JFIXED:-}
LOGS=${SPEED_LOGS:-/tmp/bulkmove-speed-logs}
RIGMODE=${SPEED_RIG:-manage}
SLOW_RATE=${SPEED_SLOW_RATE:-200mbit}
WAN=${SPEED_WAN:-50ms 400mbit}
PIPES=${SPEED_PIPES:-6}
SPLIT_K=${SPEED_SPLIT:-4}
NC_PORT=${SPEED_NC_PORT:-47100}
RAW_K=${SPEED_RAW_STREAMS:-8}
VERIFY=${SPEED_VERIFY:-bulkmove}
RUNS=${SPEED_RUNS:-1}
SPARE=${SPEED_SPARE:-/dev/shm}
RIG=${BENCH_RIG:-$(cd "$ROOT/.." && pwd)/shared/rig}
RIG_STATE=/tmp/rig
ORDER="small large slow slowh slowr slowz wan huge" # the issue's order, for the table

note() { printf 'speed: %s\n' "$*" >&2; }
die() {
	printf 'speed: error: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

. "$ROOT/bench/lib/measure.sh" # now_us, busy_ticks, median (its listening is replaced below)

secs() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1e6 }'; }
group() {
	local n=$1 s=""
	while ((${#n} > 3)); do
		s=,${n: -3}$s
		n=${n:0:${#n}-3}
	done
	echo "$n$s"
}
gb() { awk -v b="$1" 'BEGIN { printf "%.2f GB", b / 1e9 }'; }
q() { printf '%q' "$1"; } # a path for the remote shell

HZ=$(getconf CLK_TCK)

# ---------------------------------------------------------------- results
# Per row (key REGIME.TOOL): LABEL (the command as shown), T (µs) or ERR, CPU (whole-machine
# busy CPU-s, from the listener's start for tar | nc), REF (the key of
# the target's reference, or "link"), TARGET (text), KIND/FACTOR (how it is judged),
# and for bulkmove rows VER (treecmp) and BUSY (the streams' "busy until", seconds).
declare -A FIXED # the rows fixed_j added
declare -A TS CS # every round's wall µs and CPU-s of a row, space-separated
declare -A LABEL T CPU ERR REF TARGET KIND FACTOR VER BUSY RESULT FIRST NECK KEND
declare -A NOTES SETDESC SKIP
ROWS=()      # keys in the order run
FAILED=0     # a run failed or a copy did not verify
NC_N=0       # listeners started, for fresh ports

# ---------------------------------------------------------------- the rig

rig() {
	printf '$ net.sh %s\n' "$*" >>"$LOGS/rig.log"
	if ! "$RIG/net.sh" "$@" >>"$LOGS/rig.log" 2>&1; then
		note "net.sh $* failed:"
		tail -n 20 "$LOGS/rig.log" | sed 's/^/    /' >&2
		return 1
	fi
}

# The direct link's tbf rate as tc prints it, lower case ("" when uncapped).
cur_cap() {
	ip netns exec bm-src tc qdisc show dev bm-a 2>/dev/null |
		sed -n 's/.*tbf .*rate \([^ ]*\).*/\1/p' | tr 'A-Z' 'a-z'
}

# tc prints 200mbit as 200mbit and 1gbit as 1gbit; normalise "200Mbit" the same way.
norm_rate() { echo "$1" | tr 'A-Z' 'a-z'; }

wanem_pid() {
	local p
	p=$(cat "$RIG_STATE/wanem.pid" 2>/dev/null) || return 1
	[[ -n $p ]] && kill -0 "$p" 2>/dev/null && echo "$p"
}

# rig_usable: namespaces up, sshd sees MNT, ssh box2 works.
rig_usable() {
	local pid
	ip netns list 2>/dev/null | grep -qw bm-dst || return 1
	pid=$(cat "$RIG_STATE/ssh/sshd.pid" 2>/dev/null) || return 1
	[[ -n $pid && -r /proc/$pid/mountinfo ]] || return 1
	awk -v m="$MNT" '$5 == m { found = 1 } END { exit !found }' "/proc/$pid/mountinfo" || return 1
	timeout 20 ip netns exec bm-src ssh -o BatchMode=yes box2 true </dev/null >/dev/null 2>&1
}

RIG_TOUCHED=0

# want_rig CAP WAN: the direct link capped at CAP ("" none), wanem at $WAN (WAN=1) or
# not running (WAN=0). Prints what the regime runs on into RIGDESC.
want_rig() {
	local cap=$1 wan=$2 a=($WAN) p
	if [[ $RIGMODE == keep ]]; then
		rig_usable || { note "SPEED_RIG=keep, but the rig is not usable (or its sshd does not see $MNT)"; return 1; }
		local c
		c=$(cur_cap)
		RIGDESC="rig kept as it was (SPEED_RIG=keep): direct link ${c:+capped at $c}${c:-uncapped}${cap:+ (wanted: $cap)}"
		if ((wan)); then
			p=$(wanem_pid) || { note "SPEED_RIG=keep and no wanem runs: cannot run wan"; return 1; }
			RIGDESC+="; wanem as it runs: $(tr '\0' ' ' </proc/$p/cmdline)"
		fi
		return 0
	fi
	if ! rig_usable || [[ $(cur_cap) != "$(norm_rate "$cap")" ]]; then
		note "rig: net.sh down; net.sh up $cap"
		RIG_TOUCHED=1
		rig down || return 1
		rig up $cap || return 1
		rig_usable || { note "rig is up, but ssh box2 fails or its sshd does not see $MNT"; return 1; }
	fi
	if ((wan)); then
		p=$(wanem_pid)
		if [[ -z $p || $(tr '\0' ' ' </proc/$p/cmdline) != *"-delay ${a[0]} -rate ${a[1]} -loss ${a[2]:-0}"* ]]; then
			note "rig: net.sh wan $WAN"
			RIG_TOUCHED=1
			rig wan "${a[@]}" || return 1
		fi
		RIGDESC="wanem: ${a[0]} each way, ${a[1]} each way${a[2]:+, loss ${a[2]}}"
	else
		if p=$(wanem_pid); then
			note "rig: stopping wanem (pid $p), idle but not wanted here"
			RIG_TOUCHED=1
			kill "$p" 2>/dev/null
			rm -f "$RIG_STATE/wanem.pid"
		fi
		RIGDESC="direct veth link${cap:+, capped at $cap by tbf (net.sh up $cap)}"
	fi
}

# restore_rig: net.sh up without a cap, no wanem (unless SPEED_RIG=keep).
restore_rig() {
	[[ $RIGMODE == keep ]] && return 0
	local p
	if p=$(wanem_pid); then
		kill "$p" 2>/dev/null
		rm -f "$RIG_STATE/wanem.pid"
		note "rig: stopped wanem"
	fi
	if [[ -n $(cur_cap) ]] || ! rig_usable; then
		note "rig: restoring it: net.sh down; net.sh up"
		rig down && rig up
	fi
}

# ---------------------------------------------------------------- space and data

BASE=$MNT/bulkmove-speed

# place EST: decide where a dataset of about EST bytes of tmpfs (per copy) goes:
# SRC_TOP (source) under MNT if MNT holds two copies, else under SPARE.
place() {
	local est=$1 avail spare
	avail=$(df -B1 --output=avail "$MNT" | tail -n1)
	SRC_TOP=$BASE/src PLACE_NOTE=""
	if ((avail >= est * 21 / 10)); then
		return 0
	fi
	if ((avail >= est * 11 / 10)) && [[ $(stat -f -c %T "$SPARE" 2>/dev/null) == tmpfs ]]; then
		spare=$(df -B1 --output=avail "$SPARE" | tail -n1)
		if ((spare >= est * 11 / 10)); then
			SRC_TOP=$SPARE/bulkmove-speed-src
			PLACE_NOTE="source on $SPARE (tmpfs): $MNT had $(gb "$avail") free, not the $(gb $((est * 21 / 10))) for source and copy"
			note "$PLACE_NOTE"
			return 0
		fi
	fi
	SKIP_WHY="not enough room: $MNT has $(gb "$avail") free, the source and its copy need about $(gb $((est * 21 / 10)))"
	return 1
}

drop_data() {
	rm -rf "$BASE" "$SPARE/bulkmove-speed-src"
}

# gen REGIME ARGS...: bench/gentree ARGS -o SRC; sets SRC, NFILES, NBYTES, SETDESC.
gen() {
	local regime=$1 t0 t1
	shift
	SRC=$SRC_TOP/$regime
	rm -rf "$SRC" && mkdir -p "$SRC_TOP" "$BASE/dst" || return 1
	t0=$(now_us)
	"$GENTREE" -q "$@" -o "$SRC" || return 1
	t1=$(now_us)
	read -r NFILES NBYTES < <(find "$SRC" -type f -printf '%s\n' | awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }')
	NB[$regime]=$NBYTES
	SETDESC[$regime]="$(group "$NFILES") files, $(awk -v b="$NBYTES" 'BEGIN { printf "%.1f MB", b / 1e6 }') (gentree $*; generated in $(secs $((t1 - t0))) s)"
	note "$regime: ${SETDESC[$regime]}"
	# Touch the tmpfs pages the copies will use (untimed), as bench/run.sh does.
	DSTL=$BASE/dst/$regime
	rm -rf "$DSTL"
	cp -a "$SRC/." "$DSTL" 2>/dev/null
	rm -rf "$DSTL"
}

# ---------------------------------------------------------------- tools
# Each copies SRC ($1) into the destination directory ($2, a local path: the rig's hosts
# share this filesystem) on host $HOST, the sender in bm-src.

S() { ip netns exec bm-src "$@"; }

tool_tar_ssh() {
	tar -C "$1" -cf - . | S ssh "$HOST" "mkdir -p $(q "$2") && tar -C $(q "$2") -xf -"
}

tool_tar_zstd_ssh() {
	tar -C "$1" -cf - . | zstd -1 -q -c | S ssh "$HOST" "mkdir -p $(q "$2") && zstd -d -q -c | tar -C $(q "$2") -xf -"
}

tool_rsync() { S rsync -a "$1/" "$HOST:$2/"; }
tool_rsync_z() { S rsync -az "$1/" "$HOST:$2/"; }

# listening PORT: wait (up to 5 s) until something listens on PORT in bm-dst.
listening() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -n $(ip netns exec bm-dst ss -Hltn "sport = :$1" 2>/dev/null) ]] && return 0
		sleep 0.05
	done
	note "nc did not listen on $1 in bm-dst"
	return 1
}

# tar | nc: the listener (nc -l | tar -x in bm-dst) is started before the clock.
NC_PID=""
pre_nc() {
	local port=$((NC_PORT + NC_N))
	NC_N=$((NC_N + 1))
	NC_ADDR=198.18.0.2 NC_P=$port
	ip netns exec bm-dst sh -c 'mkdir -p "$1" && nc -l -p "$2" </dev/null | tar -C "$1" -xf -' _ "$2" "$port" &
	NC_PID=$!
	listening "$port" && return 0
	kill "$NC_PID" 2>/dev/null
	return 1
}
tool_tar_nc() {
	local rc=0
	tar -C "$1" -cf - . | S nc -N "$NC_ADDR" "$NC_P" || rc=$?
	wait "$NC_PID" || rc=$?
	NC_PID=""
	return "$rc"
}

# RAW_K raw TCP streams (nc) to HOST's address, carrying NBYTES (the tree's file bytes)
# between them: the listeners (nc -l > /dev/null in bm-dst) start before the clock.
RAW_PIDS=()
pre_raw() {
	local i port addr
	addr=$(S ssh -G "$HOST" 2>/dev/null | awk '$1 == "hostname" { print $2 }')
	RAW_ADDR=$addr RAW_PORTS=() RAW_PIDS=()
	for ((i = 0; i < RAW_K; i++)); do
		port=$((NC_PORT + 500 + NC_N))
		NC_N=$((NC_N + 1))
		ip netns exec bm-dst nc -l -p "$port" </dev/null >/dev/null &
		RAW_PIDS+=($!) RAW_PORTS+=("$port")
	done
	for port in "${RAW_PORTS[@]}"; do
		listening "$port" && continue
		kill "${RAW_PIDS[@]}" 2>/dev/null
		return 1
	done
}
tool_raw() {
	local i each=$(((NBYTES + RAW_K - 1) / RAW_K)) pids=() p rc=0
	for ((i = 0; i < RAW_K; i++)); do
		head -c "$each" /dev/zero | S nc -N "$RAW_ADDR" "${RAW_PORTS[i]}" &
		pids+=($!)
	done
	for p in "${pids[@]}" "${RAW_PIDS[@]}"; do wait "$p" || rc=1; done
	RAW_PIDS=()
	return "$rc"
}

# K × tar | ssh: every non-directory (and empty directory) of SRC dealt round robin into
# K lists (untimed). Hard links split across lists arrive as copies.
pre_pipes() {
	local k=$PIPES
	rm -rf "$WORK/pipes" && mkdir -p "$WORK/pipes"
	(cd "$1" && find . -mindepth 1 \( ! -type d -o -empty \) -print0) | split -t '\0' -n "r/$k" - "$WORK/pipes/part."
}
tool_pipes() {
	local p pids=() rc=0
	for p in "$WORK"/pipes/part.*; do
		tar -C "$1" --null --verbatim-files-from -T "$p" -cf - |
			S ssh "$HOST" "mkdir -p $(q "$2") && tar -C $(q "$2") -xf -" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return "$rc"
}

# fpsync (fpart's): SPEED_PIPES rsync jobs at once, run locally (in bm-src), to HOST.
pre_fpsync() { rm -rf "$WORK/fpsync" && mkdir -p "$WORK/fpsync" "$2"; }
tool_fpsync() { S fpsync -n "$PIPES" -t "$WORK/fpsync" "$1/" "$HOST:$2/"; }

# mscp-style split: SPLIT_K ssh pipes; pipe i sends the i-th byte range of the big file
# (read and written in place with dd), then the i-th share of the other files (tar).
pre_split() {
	local big size chunk i off len
	big=$(cd "$1" && find . -maxdepth 1 -type f -printf '%s %P\n' | sort -n | tail -n1)
	size=${big%% *} SPLIT_BIG=${big#* }
	chunk=$(((size + SPLIT_K - 1) / SPLIT_K))
	chunk=$(((chunk + (1 << 20) - 1) >> 20 << 20)) # whole MiB
	rm -rf "$WORK/split" && mkdir -p "$WORK/split"
	(cd "$1" && find . -mindepth 1 ! -type d ! -path "./$SPLIT_BIG" -print0) | split -t '\0' -n "r/$SPLIT_K" - "$WORK/split/part."
	SPLIT_RANGES=()
	for ((i = 0; i < SPLIT_K; i++)); do
		off=$((i * chunk)) len=$((size - off))
		((len > chunk)) && len=$chunk
		((len < 0)) && len=0
		SPLIT_RANGES+=("$off $len")
	done
}
tool_split() {
	local i off len p pids=() rc=0 parts=("$WORK"/split/part.*)
	for ((i = 0; i < SPLIT_K; i++)); do
		read -r off len <<<"${SPLIT_RANGES[i]}"
		p=${parts[i]:-/dev/null}
		{
			dd if="$1/$SPLIT_BIG" bs=1M iflag=skip_bytes,count_bytes skip="$off" count="$len" status=none
			tar -C "$1" --null --verbatim-files-from -T "$p" -cf -
		} | S ssh "$HOST" "mkdir -p $(q "$2") && dd of=$(q "$2/$SPLIT_BIG") bs=1M iflag=fullblock,count_bytes count=$len oflag=seek_bytes seek=$off conv=notrunc status=none && tar -C $(q "$2") -xf -" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return "$rc"
}

# tool_bulkmove [FLAGS...] SRC DST: defaults, -v, the agent at the built binary.
tool_bulkmove() {
	local n=$#
	S "$BULKMOVE" -v --remote-bulkmove "$BULKMOVE" "${@:1:n-2}" "${@:n-1:1}" "$HOST:${@:n:1}"
}

# The -j auto row of each regime, judged against fixed -j (SPEED_JFIXED).
declare -A AUTOROW=([small]=small.bm_ssh [large]=large.bm_ssh [slow]=slow.bm_auto [slowh]=slowh.bm_auto [slowr]=slowr.bm_auto [slowz]=slowz.bm_auto [wan]=wan.bm_ssh [huge]=huge.bm_ssh)

# fixed_j REGIME: with SPEED_JFIXED, bulkmove over SSH streams at each fixed -j.
fixed_j() {
	local n
	for n in $JFIXED; do
		[[ -n ${LABEL[$1.bm_j$n]:-} && -z ${FIXED[$1.bm_j$n]:-} ]] && continue # the regime's own row
		FIXED[$1.bm_j$n]=1
		run "$1" "bm_j$n" "bulkmove -j $n SRC $HOST:DST  (SSH streams, fixed)" tool_bulkmove -j "$n"
		target "$1.bm_j$n" "${AUTOROW[$1]}" peer 0 ""
	done
}

# ---------------------------------------------------------------- running

# run REGIME TOOL LABEL [--pre FUNC] FUNC [ARGS...]: one timed copy into a fresh
# destination. bulkmove rows are verified and their streams' "busy until" kept.
run() {
	local regime=$1 tool=$2 label=$3 pre="" key t0 t1 c0 c1 rc log
	shift 3
	if [[ $1 == --pre ]]; then
		pre=$2
		shift 2
	fi
	key=$regime.$tool
	[[ " ${ROWS[*]} " == *" $key "* ]] || ROWS+=("$key")
	LABEL[$key]=$label
	log=$LOGS/$regime-$tool.log
	DSTL=$BASE/dst/$regime
	rm -rf "$DSTL"
	c0=$(busy_ticks)
	if [[ -n $pre ]] && ! $pre "$SRC" "$DSTL" >"$log" 2>&1; then
		ERR[$key]="setup failed"
		FAILED=1
		note "$key: setup failed:"
		tail -n 20 "$log" | sed 's/^/    /' >&2
		return 1
	fi
	t0=$(now_us)
	"$@" "$SRC" "$DSTL" >>"$log" 2>&1
	rc=$?
	t1=$(now_us)
	c1=$(busy_ticks)
	if ((rc != 0)); then
		ERR[$key]="exit $rc"
		FAILED=1
		note "$key: failed (exit $rc) after $(secs $((t1 - t0))) s:"
		tail -n 20 "$log" | sed 's/^/    /' >&2
		rm -rf "$DSTL"
		return 1
	fi
	# The row's figures: the median of its rounds so far.
	TS[$key]+=" $((t1 - t0))"
	CS[$key]+=" $(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')"
	T[$key]=$(printf '%s\n' ${TS[$key]} | median %.0f)
	CPU[$key]=$(printf '%s\n' ${CS[$key]} | median)
	note "$key: $(secs $((t1 - t0))) s, $(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }') CPU-s (median so far: $(secs "${T[$key]}") s, $(mbs "$key") MB/s, ${CPU[$key]} CPU-s)"
	if [[ $tool == raw* ]]; then
		: # no copy: bytes to /dev/null
	elif [[ $tool == bm* ]]; then
		local flags=()
		[[ $(id -u) == 0 ]] && flags+=(-owner)
		if "$TREECMP" -max 20 "${flags[@]}" "$SRC" "$DSTL" >"$LOGS/$regime-$tool.verify" 2>&1; then
			[[ ${VER[$key]:-} == FAIL ]] || VER[$key]=yes
		else
			VER[$key]=FAIL
			FAILED=1
			note "$key: the copy differs from the source:"
			head -n 20 "$LOGS/$regime-$tool.verify" | sed 's/^/    /' >&2
		fi
		BUSY[$key]=$(sed -n 's/.*busy until \([0-9.]*\)s$/\1/p' "$log" | tr '\n' ' ')
		BUSY[$key]=${BUSY[$key]% }
		# Start-up (SSH, agent, streams) and bulkmove's own verdict, for the notes.
		FIRST[$key]=$(sed -n 's/^bulkmove: *\([0-9.]*\)s first batch handed.*/\1/p' "$log" | head -n1)
		NECK[$key]=$(sed -n 's/.* errors; bottleneck \(.*\)$/\1/p' "$log" | tail -n1)
		# Streams at the end: -j auto's last step ("auto: 8 -> 4 streams"); the ones it
		# retired before have stopped early by design, not for want of work.
		KEND[$key]=$(sed -n 's/.* auto: [0-9]* -> \([0-9]*\) streams.*/\1/p' "$log" | tail -n1)
	else
		# A peer's copy is not compared (unless SPEED_VERIFY=all: names, types and
		# content only), but a pipe that broke early shows here.
		local nf nb
		if [[ $VERIFY == all ]]; then
			if "$TREECMP" -max 20 -no-mtime -no-mode -no-hardlinks -no-dir-mtime "$SRC" "$DSTL" >"$LOGS/$regime-$tool.verify" 2>&1; then
				VER[$key]="yes (content)"
			else
				VER[$key]="incomplete or different (see $LOGS/$regime-$tool.verify)"
				note "$key: the copy differs from the source:"
				head -n 20 "$LOGS/$regime-$tool.verify" | sed 's/^/    /' >&2
			fi
		fi
		read -r nf nb < <(find "$DSTL" -type f -printf '%s\n' 2>/dev/null | awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }')
		if [[ ${VER[$key]:-} != incomplete* ]] && [[ $nf != "$NFILES" || $nb != "$NBYTES" ]]; then
			VER[$key]="incomplete: $nf files, $nb bytes"
			note "$key: the copy is incomplete: $nf of $NFILES files, $nb of $NBYTES bytes"
		fi
	fi
	rm -rf "$DSTL"
}

mbs() { awk -v b="$NBYTES" -v u="${T[$1]}" 'BEGIN { printf "%.1f", b / u }'; }

# target KEY REF KIND FACTOR TEXT: what KEY is judged against.
#   time  T[KEY] / T[REF] <= FACTOR      speed  T[REF] / T[KEY] >= FACTOR
#   link  MB/s / LINK_MBS >= FACTOR      (+busy: also all streams busy to the end)
target() { REF[$1]=$2 KIND[$1]=$3 FACTOR[$1]=$4 TARGET[$1]=$5; }

# rate_mbs 400mbit -> 50 (MB/s, 10^6 bytes)
rate_mbs() {
	awk -v r="$1" 'BEGIN {
		r = tolower(r); m = 0
		if (r ~ /^[0-9.]+gbit$/) m = 1e9; else if (r ~ /^[0-9.]+mbit$/) m = 1e6
		else if (r ~ /^[0-9.]+kbit$/) m = 1e3
		if (m && r + 0 > 0) printf "%g", (r + 0) * m / 8e6
	}'
}

# busy_ok KEY: every stream the job still had at the end (the KEND latest, when -j auto
# retired some) was busy until at least 90% of the last one's busy-until.
busy_ok() {
	local b=${BUSY[$1]:-}
	[[ -n $b ]] || return 2
	awk -v l="$b" -v k="${KEND[$1]:-0}" 'BEGIN { n = split(l, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] > a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		if (k < 1 || k > n) k = n
		exit !(a[1] > 0 && a[k] >= 0.9 * a[1]) }'
}

# ---------------------------------------------------------------- regimes
# Each sets HOST, generates its dataset, runs its rows, sets targets; LINK_MBS per regime.

declare -A LINK
regime_small() {
	want_rig "" 0 || return 1
	HOST=box2
	place $((SMALL_N * 4096 + (64 << 20))) || return 1
	gen small -kind small -n "$SMALL_N" -dirs "$SMALL_DIRS" -size 1024 || return 1
	run small tar_ssh "tar -C SRC -cf - . | ssh box2 tar -C DST -xf -" tool_tar_ssh
	run small tar_nc "tar -C SRC -cf - . | nc -N box2 PORT  (bm-dst: nc -l -p PORT | tar -x)" --pre pre_nc tool_tar_nc
	run small rsync "rsync -a SRC/ box2:DST/" tool_rsync
	run small bm_ssh "bulkmove SRC box2:DST  (SSH streams)" tool_bulkmove
	run small bm_tls "bulkmove --transport tls SRC box2:DST" tool_bulkmove --transport tls
	fixed_j small
	target small.tar_nc small.tar_ssh peer 0 ""
	target small.rsync small.tar_ssh peer 0 ""
	target small.bm_ssh small.tar_ssh time 0.7 "≤ 0.7× tar \| ssh time"
	target small.bm_tls small.tar_nc time 1.0 "≤ 1.0× tar \| nc time"
}

regime_large() {
	want_rig "" 0 || return 1
	HOST=box2
	place $((LARGE_N * LARGE_SIZE + (64 << 20))) || return 1
	gen large -kind large -n "$LARGE_N" -size "$LARGE_SIZE" || return 1
	run large tar_ssh "tar -C SRC -cf - . | ssh box2 tar -C DST -xf -" tool_tar_ssh
	run large tar_nc "tar -C SRC -cf - . | nc -N box2 PORT  (bm-dst: nc -l -p PORT | tar -x)" --pre pre_nc tool_tar_nc
	run large bm_ssh "bulkmove SRC box2:DST  (SSH streams)" tool_bulkmove
	run large bm_tls "bulkmove --transport tls SRC box2:DST" tool_bulkmove --transport tls
	run large bm_tcp "bulkmove --transport tcp --no-verify-transfer SRC box2:DST  (sendfile, splice)" tool_bulkmove --transport tcp --no-verify-transfer
	fixed_j large
	target large.tar_nc large.tar_ssh peer 0 ""
	target large.bm_ssh large.tar_ssh speed 1.5 "≥ 1.5× tar \| ssh MB/s"
	target large.bm_tls large.tar_ssh speed 2 "≥ 2× tar \| ssh MB/s"
	target large.bm_tcp large.tar_ssh peer 0 ""
}

# zstd_share: tar | zstd -1's bytes over tar's, of SRC.
zstd_share() {
	tar -C "$SRC" -cf - . | zstd -1 -c | wc -c | awk -v n="$(tar -C "$SRC" -cf - . | wc -c)" '{ printf "%.2f", $1 / n }'
}

# slow_tree REGIME KIND: the slow link over gentree's KIND tree: tar | zstd -1 | ssh,
# tar | ssh and bulkmove (--compress auto); the caller sets the targets.
slow_tree() {
	local regime=$1 kind=$2
	want_rig "$SLOW_RATE" 0 || return 1
	HOST=box2
	LINK[$regime]=$(rate_mbs "$SLOW_RATE")
	place $((MIXED_N * 28 * 1024 + (64 << 20))) || return 1
	gen "$regime" -kind "$kind" -n "$MIXED_N" -seed 1 || return 1
	SETDESC[$regime]+="; tar | zstd -1: $(zstd_share) of tar's bytes"
	run "$regime" tar_zstd "tar -C SRC -cf - . | zstd -1 | ssh box2 'zstd -d | tar -C DST -xf -'" tool_tar_zstd_ssh
	run "$regime" tar_ssh "tar -C SRC -cf - . | ssh box2 tar -C DST -xf -" tool_tar_ssh
	run "$regime" bm_auto "bulkmove SRC box2:DST  (--compress auto)" tool_bulkmove
}

regime_slow() {
	slow_tree slow mixed || return 1
	run slow rsync_z "rsync -az SRC/ box2:DST/" tool_rsync_z
	run slow bm_none "bulkmove --compress=none SRC box2:DST" tool_bulkmove --compress=none
	fixed_j slow
	target slow.tar_ssh slow.tar_zstd peer 0 ""
	target slow.rsync_z slow.tar_zstd peer 0 ""
	target slow.bm_auto slow.tar_zstd time 0.95 "≤ 0.95× tar \| zstd -1 \| ssh time"
	target slow.bm_none slow.tar_zstd peer 0 ""
}

# slowh: the half-and-half tree (every file half random, half a repeated line: zstd -1
# halves it, and that pipe is at the wire's limit).
regime_slowh() {
	slow_tree slowh half || return 1
	fixed_j slowh
	target slowh.tar_ssh slowh.tar_zstd peer 0 ""
	target slowh.bm_auto slowh.tar_zstd time 1.02 "≤ 1.02× tar \| zstd -1 \| ssh time"
}

# slowr: random data, where compressing cannot pay.
regime_slowr() {
	slow_tree slowr random || return 1
	fixed_j slowr
	target slowr.tar_zstd slowr.tar_ssh peer 0 ""
	target slowr.bm_auto slowr.tar_ssh time 1.02 "≤ 1.02× tar \| ssh time"
}

# slowz: the same, on the mixed tree turned into hex: every regular file's bytes are
# replaced, size kept, by the hex digits of its first half (zstd -1: about 0.55, near the
# entropy floor of 0.5), mtimes restored. Deterministic, like the tree.
make_compressible() {
	python3 - "$1" <<'PY'
import binascii, os, stat, sys
seen = set()
for d, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(d, f)
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        with open(p, "r+b") as fh:
            data = fh.read()
            fh.seek(0)
            fh.write(binascii.hexlify(data[: (len(data) + 1) // 2])[: len(data)])
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
PY
}

regime_slowz() {
	want_rig "$SLOW_RATE" 0 || return 1
	HOST=box2
	LINK[slowz]=$(rate_mbs "$SLOW_RATE")
	have python3 || { SKIP_WHY="python3 is missing (it makes the tree compressible)"; return 1; }
	place $((MIXED_N * 24 * 1024 + (64 << 20))) || return 1
	gen slowz -kind mixed -n "$MIXED_N" -seed 1 || return 1
	make_compressible "$SRC" || return 1
	SETDESC[slowz]+="; every file's content then replaced by the hex digits of its first half (tar | zstd -1: $(zstd_share) of tar's bytes)"
	run slowz tar_zstd "tar -C SRC -cf - . | zstd -1 | ssh box2 'zstd -d | tar -C DST -xf -'" tool_tar_zstd_ssh
	run slowz rsync_z "rsync -az SRC/ box2:DST/" tool_rsync_z
	run slowz bm_auto "bulkmove SRC box2:DST  (--compress auto)" tool_bulkmove
	run slowz bm_none "bulkmove --compress=none SRC box2:DST" tool_bulkmove --compress=none
	fixed_j slowz
	target slowz.rsync_z slowz.tar_zstd peer 0 ""
	target slowz.bm_auto slowz.tar_zstd time 0.9 "≤ 0.9× tar \| zstd -1 \| ssh time"
	target slowz.bm_none slowz.tar_zstd peer 0 ""
}

regime_wan() {
	want_rig "" 1 || return 1
	HOST=wan2
	local a=($WAN)
	LINK[wan]=$(rate_mbs "${a[1]}")
	place $((MIXED_N * 28 * 1024 + (64 << 20))) || return 1
	gen wan -kind half -n "$MIXED_N" -seed 1 || return 1
	# The ceiling first: what plain TCP carries over this path in the same run.
	run wan raw "$RAW_K × nc (raw TCP streams, the tree's $(group "$NBYTES") bytes between them, to /dev/null)" --pre pre_raw tool_raw
	run wan tar_ssh "tar -C SRC -cf - . | ssh wan2 tar -C DST -xf -" tool_tar_ssh
	run wan pipes "$PIPES × tar --null -T LIST_i -cf - | ssh wan2 tar -C DST -xf -  (files dealt round robin, untimed)" --pre pre_pipes tool_pipes
	if have fpsync; then
		run wan fpsync "fpsync -n $PIPES SRC/ wan2:DST/" --pre pre_fpsync tool_fpsync
		target wan.fpsync wan.raw peer 0 ""
	else
		[[ ${NOTES[wan]:-} == *fpsync:* ]] || NOTES[wan]+="fpsync: not installed (apt-get install fpart), not run. "
	fi
	run wan bm_ssh "bulkmove SRC wan2:DST  (-j auto, SSH streams)" tool_bulkmove
	run wan bm_j8 "bulkmove -j 8 SRC wan2:DST  (SSH streams)" tool_bulkmove -j 8
	run wan bm_tls "bulkmove --transport tls SRC wan2:DST  (-j auto)" tool_bulkmove --transport tls
	fixed_j wan
	target wan.raw link peer 0 ""
	target wan.tar_ssh wan.raw peer 0 ""
	target wan.pipes wan.raw peer 0 ""
	target wan.bm_ssh wan.raw speed 0.95 "≥ 0.95× raw TCP's speed"
	target wan.bm_j8 wan.raw speed 0.95 "≥ 0.95× raw TCP's speed"
	target wan.bm_tls wan.raw peer 0 ""
}

regime_huge() {
	want_rig "" 0 || return 1
	HOST=box2
	place $((HUGE_SIZE + HUGE_N * 4096 + (64 << 20))) || return 1
	gen huge -kind huge -n "$HUGE_N" -size "$HUGE_SIZE" || return 1
	run huge tar_ssh "tar -C SRC -cf - . | ssh box2 tar -C DST -xf -" tool_tar_ssh
	run huge split "$SPLIT_K × (dd range_i of the big file; tar -T LIST_i) | ssh box2 (dd seek=off_i; tar -x)  (mscp-style)" --pre pre_split tool_split
	run huge bm_ssh "bulkmove SRC box2:DST  (SSH streams)" tool_bulkmove
	run huge bm_tls "bulkmove --transport tls SRC box2:DST" tool_bulkmove --transport tls
	fixed_j huge
	have mscp || NOTES[huge]+="mscp itself is not installed (Debian does not package it): the split row stands in for it. "
	target huge.split huge.tar_ssh peer 0 ""
	target huge.bm_ssh huge.tar_ssh speed+busy 1.5 "≥ 1.5× tar \| ssh MB/s; all streams busy to the end"
	target huge.bm_tls huge.tar_ssh peer 0 ""
}

# ---------------------------------------------------------------- the table

declare -A TITLE=(
	[small]="CPU-bound small files"
	[large]="CPU-bound large files"
	[slow]="slow link"
	[slowh]="slow link, half-and-half tree"
	[slowr]="slow link, random tree"
	[slowz]="slow link, hex tree"
	[wan]="long path"
	[huge]="huge + small"
)
declare -A NB # bytes moved per regime, for MB/s

out() { printf '%s\n' "$@" | tee -a "$OUT"; }
md() { local s=${1//|/\\|}; echo "$s"; }

# judge KEY: sets RESULT[KEY], and J_VS (the reference), J_RT (time ÷ reference's),
# J_RS (speed × reference's, or the fraction of the link).
judge() {
	local k=$1 r=${REF[$1]:-} kind=${KIND[$1]:-peer} f=${FACTOR[$1]:-0} regime=${1%%.*}
	local t=${T[$k]:-} tr="" ratio_t="–" ratio_s="–" vs="(reference)" ok=""
	RESULT[$k]="–"
	if [[ $r == link ]]; then
		vs="link ${LINK[$regime]} MB/s"
		if [[ -n $t ]]; then
			ratio_s=$(awk -v b="${NB[$regime]:-0}" -v u="$t" -v l="${LINK[$regime]}" 'BEGIN { printf "%.2f", b / u / l }')
			ok=$(awk -v x="$ratio_s" -v f="$f" 'BEGIN { print (x >= f) ? "PASS" : "FAIL" }')
		fi
	elif [[ -n $r ]]; then
		vs=$(md "${SHORT[${r#*.}]:-$r}")
		tr=${T[$r]:-}
		if [[ -n $t && -n $tr ]]; then
			ratio_t=$(awk -v a="$t" -v b="$tr" 'BEGIN { printf "%.2f", a / b }')
			ratio_s=$(awk -v a="$t" -v b="$tr" 'BEGIN { printf "%.2f", b / a }')
			case $kind in
			time) ok=$(awk -v x="$ratio_t" -v f="$f" 'BEGIN { print (x <= f) ? "PASS" : "FAIL" }') ;;
			speed*) ok=$(awk -v x="$ratio_s" -v f="$f" 'BEGIN { print (x >= f) ? "PASS" : "FAIL" }') ;;
			esac
		fi
	fi
	if [[ $kind == *busy && -n $t && -n $ok ]]; then
		local why=""
		[[ $ok == FAIL ]] && why="speed ${ratio_s}× < ${f}×"
		busy_ok "$k"
		case $? in
		0) : ;;
		1) why+="${why:+; }streams idle before the end" ;;
		*) why+="${why:+; }no busy-until lines" ;;
		esac
		ok=PASS
		[[ -n $why ]] && ok="FAIL ($why)"
	fi
	if [[ $kind != peer ]]; then
		if [[ -n ${ERR[$k]:-} ]]; then
			ok="FAIL (${ERR[$k]})"
		elif [[ -z $t ]]; then
			ok="not run"
		elif [[ -z $ok ]]; then
			ok="not judged (no reference time)"
		fi
		[[ ${VER[$k]:-} == FAIL ]] && ok="FAIL (copy differs)"
		RESULT[$k]=$ok
	elif [[ ${VER[$k]:-} == incomplete* ]]; then
		RESULT[$k]="copy ${VER[$k]}"
	fi
	[[ -z $r && -n $t ]] && ratio_t=1.00 ratio_s=1.00
	J_VS=$vs J_RT=$ratio_t J_RS=$ratio_s
}

declare -A SHORT=(
	[tar_ssh]="tar | ssh" [tar_nc]="tar | nc" [tar_zstd]="tar | zstd -1 | ssh" [raw]="raw TCP"
)

print_table() {
	local regime k first t vs rt rs n_pass=0 n_fail=0 n_other=0 tgt res
	: >"$OUT"
	out "## bulkmove speed, $(date -u '+%Y-%m-%d %H:%M UTC')" ""
	out "- command: \`${CMDLINE}\`"
	out "- machine: $(uname -srm), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)); load average at start $LOAD0"
	out "- bulkmove: $BULKMOVE, $VERSION, repository at commit $REV; peers: $(tar --version | head -n1), $(rsync --version | head -n1 | sed 's/  */ /g'), $(ssh -V 2>&1 | cut -d, -f1) (its default cipher), zstd $(zstd -V 2>/dev/null | sed -n 's/.* v\([0-9.]*\).*/\1/p')${FPSYNC_V:+, $FPSYNC_V}"
	out "- trees on $MNT ($(stat -f -c %T "$MNT")), scale $SCALE; $([[ $RUNS == 1 ]] && echo "one run each" || echo "$RUNS rounds, each method in turn, medians"); CPU-s = whole-machine busy CPU-seconds during the run (/proc/stat; for tar | nc from the listener's start); MB/s = file bytes / wall time (10^6 B/s); \"time ÷ ref\" and \"speed × ref\" are against the row's reference (vs)"
	out "" "| regime | tool | time (s) | CPU-s | MB/s | vs | time ÷ ref | speed × ref | target | result |"
	out "|---|---|--:|--:|--:|---|--:|--:|---|---|"
	for regime in $ORDER; do
		first=1
		for k in "${ROWS[@]}"; do
			[[ ${k%%.*} == "$regime" ]] || continue
			judge "$k"
			vs=$J_VS rt=$J_RT rs=$J_RS
			t=${T[$k]:-}
			res=${RESULT[$k]}
			tgt=${TARGET[$k]:-}
			out "| $( ((first)) && echo "${TITLE[$regime]}") | \`$(md "${LABEL[$k]}")\` | $([[ -n $t ]] && secs "$t" || echo "– (${ERR[$k]:-interrupted})") | ${CPU[$k]:-–} | $([[ -n $t ]] && awk -v b="${NB[$regime]:-0}" -v u="$t" 'BEGIN { printf "%.1f", b / u }' || echo –) | $vs | $rt | $rs | ${tgt:-–} | $res |"
			first=0
			case $res in PASS) n_pass=$((n_pass + 1)) ;; FAIL* | "not run" | "not judged"*) n_fail=$((n_fail + 1)) ;; esac
		done
		if [[ -n ${SKIP[$regime]:-} && " $REGIMES " == *" $regime "* ]]; then
			out "| ${TITLE[$regime]} | – | – | – | – | – | – | – | – | not run: $(md "${SKIP[$regime]}") |"
			n_other=$((n_other + 1))
		fi
	done
	out "" "Notes:"
	for regime in $ORDER; do
		[[ " $REGIMES " == *" $regime "* ]] || continue
		local line="- ${TITLE[$regime]}: ${SETDESC[$regime]:-no dataset}; ${RIGD[$regime]:-}"
		for k in "${ROWS[@]}"; do
			[[ ${k%%.*} == "$regime" && -n ${BUSY[$k]:-} ]] || continue
			local bs
			bs=$(awk -v l="${BUSY[$k]}" 'BEGIN { n = split(l, a, " "); mn = a[1]; mx = a[1]
				for (i = 2; i <= n; i++) { if (a[i] < mn) mn = a[i]; if (a[i] > mx) mx = a[i] }
				printf "%d streams, busy until %.2f–%.2f s", n, mn, mx
				if (n <= 16) { printf " ("; for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? ", " : ""), a[i]; printf ")" } }')
			line+="; \`$(md "${LABEL[$k]%%  (*}")\`: $bs"
			local used
			used=$(echo "${BUSY[$k]}" | wc -w)
			[[ -n ${KEND[$k]:-} ]] && ((KEND[$k] < used)) && line+=" ($used used, ${KEND[$k]} at the end: -j auto retired the rest)"
			if [[ -n ${FIRST[$k]:-} && -n ${T[$k]:-} ]]; then
				line+=", first batch at ${FIRST[$k]} s ($(awk -v b="${NB[$regime]:-0}" -v u="${T[$k]}" -v f="${FIRST[$k]}" 'BEGIN { d = u / 1e6 - f; if (d > 0) printf "%.1f MB/s", b / 1e6 / d; else printf "–" }') from then on)"
			fi
			[[ -n ${NECK[$k]:-} ]] && line+=", its verdict: bottleneck $(md "${NECK[$k]}")"
			line+=", verified: ${VER[$k]:-–}"
		done
		if [[ -n ${LINK[$regime]:-} ]]; then
			local shares=""
			for k in "${ROWS[@]}"; do
				[[ ${k%%.*} == "$regime" && -n ${T[$k]:-} ]] || continue
				shares+="${shares:+, }\`$(md "${LABEL[$k]%%  (*}")\` $(awk -v b="${NB[$regime]:-0}" -v u="${T[$k]}" -v l="${LINK[$regime]}" 'BEGIN { printf "%.2f", b / u / l }')"
			done
			[[ -n $shares ]] && line+="; share of the nominal ${LINK[$regime]} MB/s: $shares"
		fi
		[[ -n ${NOTES[$regime]:-} ]] && line+="; ${NOTES[$regime]% }"
		out "$line"
	done
	if [[ -n $JFIXED ]]; then
		out "" "-j auto against fixed -j (SSH streams; target: at least 90% of the best fixed -j's throughput):" ""
		out "| regime | -j auto | $(for n in $JFIXED; do printf -- '-j %s | ' "$n"; done)best fixed | auto ÷ best (speed) | result |"
		out "|---|--:|$(for n in $JFIXED; do printf -- '--:|'; done)---|--:|---|"
		for regime in $ORDER; do
			local a=${AUTOROW[$regime]:-} best="" bestn="" cells="" n ta r res
			[[ -n $a && " $REGIMES " == *" $regime "* ]] || continue
			for n in $JFIXED; do
				t=${T[$regime.bm_j$n]:-}
				cells+="$([[ -n $t ]] && secs "$t" || echo –) s | "
				if [[ -n $t ]] && { [[ -z $best ]] || ((t < best)); }; then best=$t bestn=$n; fi
			done
			ta=${T[$a]:-}
			if [[ -n $ta && -n $best ]]; then
				r=$(awk -v a="$ta" -v b="$best" 'BEGIN { printf "%.2f", b / a }')
				res=$(awk -v x="$r" 'BEGIN { print (x >= 0.9) ? "PASS" : "FAIL" }')
			else
				r="–" res="not run"
			fi
			out "| ${TITLE[$regime]} | $([[ -n $ta ]] && secs "$ta" || echo –) s | $cells-j ${bestn:-–} | $r | $res |"
			case $res in PASS) n_pass=$((n_pass + 1)) ;; *) n_fail=$((n_fail + 1)) ;; esac
		done
	fi
	out "" "Targets: $n_pass passed, $n_fail failed or not run$( ((n_other)) && echo "; regimes not run: $n_other"). Logs: $LOGS" ""
}

# ---------------------------------------------------------------- main

declare -A RIGD
WORK=""
MOUNTED_HERE=0

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	exec 1>&3 2>&4 # a signal may come while a run's output goes to its log
	[[ -n $NC_PID ]] && kill "$NC_PID" 2>/dev/null
	((${#RAW_PIDS[@]})) && kill "${RAW_PIDS[@]}" 2>/dev/null
	cd / || true
	if ((PRINT)); then print_table; fi
	drop_data
	restore_rig
	[[ -n $WORK ]] && rm -rf "$WORK"
	((rc == 0 && FAILED)) && rc=1
	exit "$rc"
}

PRINT=0
main() {
	case $SCALE in
	full)
		SMALL_N=100000 SMALL_DIRS=1000 LARGE_N=4 LARGE_SIZE=$((512 << 20))
		MIXED_N=20000 HUGE_SIZE=$((4 << 30)) HUGE_N=100000
		;;
	small)
		SMALL_N=1000 SMALL_DIRS=10 LARGE_N=4 LARGE_SIZE=$((8 << 20))
		MIXED_N=1000 HUGE_SIZE=$(((64 << 20))) HUGE_N=1000
		;;
	*) die "SPEED_SCALE must be full or small, not $SCALE" ;;
	esac
	local r
	for r in $REGIMES; do [[ " $ORDER " == *" $r "* ]] || die "unknown regime $r (have: $ORDER)"; done
	[[ $PIPES =~ ^[1-9][0-9]*$ && $SPLIT_K =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] || die "SPEED_PIPES, SPEED_SPLIT and SPEED_RUNS must be positive numbers"
	[[ $RIGMODE == manage || $RIGMODE == keep ]] || die "SPEED_RIG must be manage or keep"
	[[ $(id -u) == 0 ]] || die "needs root (the rig's network namespaces)"
	[[ -x $RIG/net.sh ]] || die "no rig at $RIG (set BENCH_RIG)"
	[[ -x $BULKMOVE ]] || die "no bulkmove at $BULKMOVE (make build, or set BULKMOVE)"
	BULKMOVE=$(realpath "$BULKMOVE")
	case $OUT in "$ROOT"/*) die "SPEED_OUT must be outside the repository" ;; esac
	local t
	for t in tar ssh rsync zstd nc go; do
		have "$t" || die "$t is missing (apt-get install -y $([[ $t == nc ]] && echo netcat-openbsd || echo "$t"))"
	done
	nc -h 2>&1 | grep -q OpenBSD || die "nc is not OpenBSD netcat (apt-get install -y netcat-openbsd): its -N and -l -p are needed"
	have fpsync && FPSYNC_V=$(fpsync -h 2>&1 | head -n1 | cut -d' ' -f1-2)

	CMDLINE="$(env | grep -E '^(SPEED_|BULKMOVE=|BENCH_RIG=)' | sort | tr '\n' ' ')bench/speed.sh"
	LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	VERSION=$("$BULKMOVE" --version 2>/dev/null | head -n1) || VERSION=unknown
	REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
	[[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] && REV+=" (work tree modified)"

	exec 3>&1 4>&2
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	if ! mountpoint -q "$MNT"; then
		mkdir -p "$MNT" && mount -t tmpfs -o size=8g,mode=0755 bmspeed "$MNT" || die "cannot mount a tmpfs on $MNT"
		note "mounted a tmpfs of 8g on $MNT (left mounted: the rig's sshd sees it)"
	fi
	[[ $(stat -f -c %T "$MNT") == tmpfs ]] || note "warning: $MNT is not a tmpfs"
	rm -rf "$LOGS" && mkdir -p "$LOGS" || die "cannot write $LOGS"
	WORK=$(mktemp -d /tmp/bulkmove-speed.XXXXXX) || die "mktemp failed"
	GENTREE=$WORK/gentree TREECMP=$WORK/treecmp
	(cd "$ROOT" && go build -o "$GENTREE" ./bench/gentree && go build -o "$TREECMP" ./bench/treecmp) ||
		die "cannot build bench/gentree and bench/treecmp"
	PRINT=1

	for r in $REGIMES; do
		note "=== $r (${TITLE[$r]}), load average $(cut -d' ' -f1-3 /proc/loadavg)"
		local round
		for ((round = 1; round <= RUNS; round++)); do
			((RUNS > 1)) && note "$r: round $round of $RUNS"
			NBYTES=0 RIGDESC="" SKIP_WHY=""
			if ! regime_"$r"; then
				SKIP[$r]=${SKIP_WHY:-setup failed (see above and $LOGS/rig.log)}
				note "$r: not run: ${SKIP[$r]}"
				break
			fi
		done
		RIGD[$r]="$RIGDESC${PLACE_NOTE:+; $PLACE_NOTE}"
		PLACE_NOTE=""
		drop_data
	done
	note "done"
}

main "$@"
