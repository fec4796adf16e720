#!/usr/bin/env bash
# bench/cpu.sh: CPU-seconds per file (`make bench-cpu`; root, two hosts of its own).
#
# What: CPU_N (100,000) files of 1 KiB (bench/gentree -kind small) on a tmpfs, copied
# between two hosts of the script's own (bench/lib/hosts.sh: network namespaces on one
# bridge, box1 sends, box2 runs an sshd of its own whose root has a HOME of its own, so a
# login runs no start-up files but the system's; the shared rig is not touched) by each
# method, in one interleaved run of CPU_RUNS rounds (each round runs every method once,
# the order rotated by one each round):
#
#   bm_ssh   bulkmove SRC box2:DST                      (its defaults: -j auto, hashes, journal)
#   bm_tls   bulkmove --transport tls SRC box2:DST
#   bm_tcp   bulkmove --transport tcp --no-verify-transfer SRC box2:DST
#   tar_ssh  tar -cf - | ssh box2 tar -xf -
#   tar_nc   tar -cf - | nc -N box2 PORT, into `nc -l | tar -xf -` on box2 (the listener is
#            started before the clock: its start-up is left out of the wall time, not out of
#            the CPU-s)
#   rsync    rsync -a SRC/ box2:DST/
#   bm_serve bulkmove --token-file T --fingerprint F SRC bulkmove://box2:PORT/ROOT/DST,
#            to a `bulkmove serve` on box2 started (and listening) before the clock, as
#            tar | nc's listener is: TLS, its defaults otherwise, no SSH login
#   floor    bench/floor -copy SRC -to DST: the file system calls the two ends cannot do
#            without (each file: lstat, open, read, fstat, close; then open to create,
#            write, set the mtime, close), one after the other on one thread, straight to
#            the kernel; no network, no archive: the least CPU the files' work takes here
#   login    ssh box2 true: what one SSH login costs here (the shell's start-up files
#            included); bm_ssh, bm_tls, bm_tcp and tar_ssh make one each, tar_nc and
#            bm_serve none. The report gives each method's CPU-s net of its logins too.
#
# How, for each run: wall time; whole-machine busy CPU-seconds (the "cpu" line of
# /proc/stat before and after: user, nice, system, irq, softirq, steal of every CPU, so
# sshd, the kernel's network work and anything else running count); and the per-process
# split from BSD process accounting (accton, package acct, installed with apt-get if
# missing): the records of the processes that exited during the run, descended from this
# script or from box2's sshd (or from an agent or sshd orphaned to init), summed by command name into sender (the bulkmove binary
# copied as bm-sender), agent (copied as bm-agent and passed as --remote-bulkmove, so the
# two ends differ in acct's 16-character command name), sshd, tar, nc, rsync, ssh (the
# client) and other (shells, mkdir, ...); "rest" is the machine's CPU-s minus those: the
# kernel's work outside any of them and every other process on the machine (on a quiet
# machine, small). Acct counts a process's threads together, to 10 ms.
#
# Then the report (Markdown, on stdout and in CPU_OUT/report.md): per method the
# medians of wall s and CPU-s, the CPU ratio to its peer (bm_ssh to tar_ssh, bm_tls and
# bm_tcp to tar_nc) and PASS/FAIL against the targets (ssh ≤ 1.0× tar | ssh's CPU-s,
# tls ≤ 1.2× tar | nc's, tcp ≤ 0.9× tar | nc's CPU-s and ≤ 0.9× its wall time), then the
# split (medians per process group). Every run's figures go to CPU_OUT/runs.tsv.
# After the rounds, one more bulkmove SSH run writes a pprof CPU profile of each end
# (BULKMOVE_TUNE_CPUPROFILE; the agent's through a wrapper script given as
# --remote-bulkmove) and `go tool pprof -top` of each: CPU_OUT/sender.pprof,
# CPU_OUT/agent-PID.pprof, CPU_OUT/sender.top.txt, CPU_OUT/agent.top.txt.
#
# CPU_MILLION=1 runs the million-file check instead: 1,000 directories × 1,000 files of
# 100 bytes over SSH, CPU_MILLION_RUNS (10) runs of bulkmove (defaults, plus -v to a log)
# interleaved with tar | ssh; per run wall s and CPU-s, then the median, the slowest and
# slowest ÷ median of each (target for bulkmove: ≤ 1.25). The -v logs of bulkmove's slow
# runs (the slowest, and any above 1.25× the median) are kept in CPU_OUT/million/.
#
# Environment (all optional):
#   BULKMOVE          bulkmove binary (default ./bin/bulkmove of this repository)
#   CPU_N             files of the tree (default 100000, 1 KiB each, CPU_N/100 directories)
#   CPU_RUNS          rounds (default 5)
#   CPU_METHODS       which methods, in this order (default "bm_ssh bm_tls bm_tcp bm_serve
#                     tar_ssh tar_nc rsync floor login"); ratios and targets need the peers
#   CPU_WARMUP        1 (default): one untimed run of each method first; 0: none
#   CPU_DIR           where the trees go, in CPU_DIR/bench-cpu, removed at the end (default
#                     /mnt/x/bench; a tmpfs: the hosts share this machine's filesystem)
#   CPU_OUT           profiles, acct files, logs, report (default /tmp/bench-cpu; an earlier
#                     run's files there are removed first)
#   CPU_PROFILE       1 (default): the pprof run; 0: none
#   CPU_MILLION       1: the million-file check instead (CPU_MILLION_RUNS, default 10;
#                     CPU_MILLION_N files, default 1000000, in CPU_MILLION_N/1000 directories)
#   CPU_NC_PORT       first port of tar | nc's listeners (default 47200)
#
# Timings and whole-machine CPU-s are meaningful only on a quiet machine (the load
# average is printed); the split's per-process figures hold better under load.

set -uo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
N=${CPU_N:-100000}
RUNS=${CPU_RUNS:-5}
METHODS=${CPU_METHODS:-bm_ssh bm_tls bm_tcp bm_serve tar_ssh tar_nc rsync floor login}
WARMUP=${CPU_WARMUP:-1}
DIR=${CPU_DIR:-/mnt/x/bench}
W=$DIR/bench-cpu # everything this script writes there, removed at the end
OUT=${CPU_OUT:-/tmp/bench-cpu}
PROFILE=${CPU_PROFILE:-1}
MILLION=${CPU_MILLION:-0}
MRUNS=${CPU_MILLION_RUNS:-10}
MN=${CPU_MILLION_N:-1000000}
NC_PORT=${CPU_NC_PORT:-47200}
HOST=box2
HZ=$(getconf CLK_TCK)
SSHD_PID=

note() { printf 'cpu: %s\n' "$*" >&2; }
die() {
	printf 'cpu: error: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }
q() { printf '%q' "$1"; } # a path for the remote shell
S() { ip netns exec "${NS[box1]}" "$@"; }
SSH() { S ssh -F "$HOSTS_DIR/ssh_config" "$@"; }

. "$ROOT/bench/lib/measure.sh" # now_us, busy_ticks, median, ratio, le, listening
. "$ROOT/bench/lib/hosts.sh"   # hosts_up, NS, HOSTS_DIR, hosts_down

# ---------------------------------------------------------------- the methods
# Each copies SRC into DST (a path on this machine: box2 shares its filesystem).

declare -A LABEL=(
	[bm_ssh]="bulkmove SRC box2:DST"
	[bm_tls]="bulkmove --transport tls"
	[bm_tcp]="bulkmove --transport tcp --no-verify-transfer"
	[tar_ssh]="tar | ssh box2 tar -x"
	[tar_nc]="tar | nc → nc -l | tar -x"
	[rsync]="rsync -a"
	[bm_serve]="bulkmove to a started serve (TLS)"
	[login]="ssh box2 true (one login)"
	[floor]="floor: the files' calls alone"
)

bm() { S "$SENDER" --ssh-config "$HOSTS_DIR/ssh_config" --remote-bulkmove "$AGENT" "$@" "$SRC" "$HOST:$DST"; }
m_bm_ssh() { bm; }
m_bm_tls() { bm --transport tls; }
m_bm_tcp() { bm --transport tcp --no-verify-transfer; }
m_tar_ssh() { tar -C "$SRC" -cf - . | SSH "$HOST" "mkdir -p $(q "$DST") && tar -C $(q "$DST") -xf -"; }
m_rsync() { S rsync -a -e "ssh -F $HOSTS_DIR/ssh_config" "$SRC/" "$HOST:$DST/"; }
m_login() { SSH "$HOST" true; }
m_floor() { S "$FLOOR" -copy "$SRC" -to "$DST"; }

# pre_tar_nc: the listener on box2, started (and listening) before the clock.
NC_N=0 NC_PID=""
pre_tar_nc() {
	NC_P=$((NC_PORT + NC_N % 100))
	NC_N=$((NC_N + 1))
	ip netns exec "${NS[box2]}" sh -c 'mkdir -p "$1" && nc -l -p "$2" </dev/null | tar -C "$1" -xf -' _ "$DST" "$NC_P" &
	NC_PID=$!
	listening "$NC_P" "$NC_PID" && return 0
	kill "$NC_PID" 2>/dev/null
	return 1
}
m_tar_nc() {
	local rc=0
	tar -C "$SRC" -cf - . | S nc -N "$NC_ADDR" "$NC_P" || rc=$?
	wait "$NC_PID" || rc=$?
	NC_PID=""
	return "$rc"
}

# pre_bm_serve: `bulkmove serve` (the agent's copy, so acct counts it as the agent) in
# box2 with root b = $W/dst, started and listening before the clock; its certificate's
# SHA-256 from its first line.
SERVE_PID="" SERVE_FP="" SERVE_P=""
pre_bm_serve() {
	local i
	SERVE_P=$((NC_PORT + 200 + NC_N % 100))
	NC_N=$((NC_N + 1))
	(umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$W/token") || return 1
	mkdir -p "$W/dst" || return 1
	: >"$W/serve.err"
	ip netns exec "${NS[box2]}" "$AGENT" serve --listen "$NC_ADDR:$SERVE_P" --root "b=$W/dst" --token-file "$W/token" 2>"$W/serve.err" &
	SERVE_PID=$!
	for ((i = 0; i < 250; i++)); do
		SERVE_FP=$(sed -n 's/.*listening on .*certificate SHA-256 \([0-9a-f]*\).*/\1/p' "$W/serve.err")
		[[ -n $SERVE_FP ]] && return 0
		sleep 0.02
	done
	note "bulkmove serve did not listen: $(head -c 300 "$W/serve.err")"
	kill "$SERVE_PID" 2>/dev/null
	SERVE_PID=""
	return 1
}
m_bm_serve() {
	local rc=0
	S "$SENDER" --token-file "$W/token" --fingerprint "$SERVE_FP" "$SRC" "bulkmove://$NC_ADDR:$SERVE_P/b/${DST##*/}" || rc=$?
	kill "$SERVE_PID" 2>/dev/null
	wait "$SERVE_PID" 2>/dev/null
	SERVE_PID=""
	return "$rc"
}

# ---------------------------------------------------------------- one measured run

# split_cpu ACCTFILE: the CPU-s of the processes in the acct file that descend from this
# script or from box2's sshd (or were an agent or an sshd orphaned before it ended), by group: "sender agent sshd tar nc rsync ssh other" on
# one line, then the biggest of "other" by command name ("bash 0.31, mkdir 0.02"; login
# shells running root's shell start-up files show here).
split_cpu() {
	dump-acct "$1" 2>/dev/null | awk -F'|' -v roots="$$ $SSHD_PID" -v hz=100 '
		function trim(s) { gsub(/^ +| +$/, "", s); return s }
		function group(c) {
			if (c == "bm-sender") return "sender"
			if (c == "bm-agent") return "agent"
			if (c ~ /^sshd/) return "sshd"
			if (c == "tar" || c == "nc" || c == "rsync" || c == "ssh") return c
			return "other"
		}
		{ p = $10 + 0; par[p] = $11 + 0; comm[p] = trim($1); cpu[p] = ($3 + $4) / hz }
		END {
			n = split(roots, r, " ")
			for (i = 1; i <= n; i++) root[r[i] + 0] = 1
			for (p in par) {
				q = p; ours = 0
				for (d = 0; d < 100; d++) {
					if (par[q] in root) { ours = 1; break }
					if (!(par[q] in par) || par[q] == q) break
					q = par[q]
				}
				# An agent or sshd whose parent ended first was handed to init: the
				# acct record has the parent at exit. Count it, and what descends
				# from it, as the session it was.
				if (!ours && (comm[q] == "bm-agent" || comm[q] ~ /^sshd/) && par[q] == 1)
					ours = 1
				if (!ours) continue
				g = group(comm[p])
				s[g] += cpu[p]
				if (g == "other") oc[comm[p]] += cpu[p]
			}
			printf "%.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n", s["sender"], s["agent"], s["sshd"], s["tar"], s["nc"], s["rsync"], s["ssh"], s["other"]
			# The four biggest of "other", by command name.
			line = ""
			for (k = 0; k < 4; k++) {
				best = ""
				for (c in oc) if (best == "" || oc[c] > oc[best]) best = c
				if (best == "" || oc[best] < 0.01) break
				line = line sprintf("%s%s %.2f", (k ? ", " : ""), best, oc[best])
				delete oc[best]
			}
			print (line == "" ? "–" : line)
		}'
}
SPLIT_NAMES="sender agent sshd tar nc rsync ssh other"

# settle: wait (up to 10 s) for the agents to exit: one may still be closing when the
# sender returns, and acct records a process only when it exits. The agents are found by
# reading /proc/*/comm in this shell (a pgrep costs tens of ms of CPU on a busy machine),
# then waited for with `tail --pid` (a kill(pid, 0) every 20 ms).
settle() {
	local f c p
	for f in /proc/[0-9]*/comm; do
		{ read -r c <"$f"; } 2>/dev/null || continue
		[[ $c == bm-agent ]] || continue
		p=${f#/proc/} p=${p%/comm}
		timeout 10 tail --pid="$p" -s 0.02 -f /dev/null ||
			note "an agent (bm-agent, pid $p) still runs 10 s after the sender returned"
	done
}

# measure METHOD TAG [ARGS...]: one run of m_METHOD into a fresh DST, with acct on.
# Sets M_WALL, M_CPU (seconds), M_SPLIT and M_OTHER (split_cpu's lines); returns 1 if it
# failed.
measure() {
	local m=$1 tag=$2 acct c0 c1 t0 t1 rc=0 nf log
	shift 2
	DST=$W/dst/$m
	rm -rf "$DST"
	acct=$OUT/acct/$tag-$m.acct log=$OUT/logs/$tag-$m.log
	: >"$acct"
	accton "$acct" >/dev/null || return 1
	c0=$(busy_ticks)
	if declare -F "pre_$m" >/dev/null && ! "pre_$m" >"$log" 2>&1; then
		accton off >/dev/null
		return 1
	fi
	t0=$(now_us)
	"m_$m" "$@" >>"$log" 2>&1 || rc=$?
	t1=$(now_us)
	[[ $m == bm* ]] && settle
	c1=$(busy_ticks)
	accton off >/dev/null
	M_WALL=$(awk -v u=$((t1 - t0)) 'BEGIN { printf "%.2f", u / 1e6 }')
	M_CPU=$(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
	{
		read -r M_SPLIT
		read -r M_OTHER
	} < <(split_cpu "$acct")
	if ((rc != 0)); then
		note "$tag $m: failed (exit $rc):"
		tail -n 15 "$log" | sed 's/^/    /' >&2
		return 1
	fi
	nf=$NFILES
	[[ $m == login ]] || nf=$(find "$DST" -type f | wc -l)
	if [[ $nf != "$NFILES" ]]; then
		note "$tag $m: the copy has $nf files, not $NFILES (see $log)"
		return 1
	fi
	rm -rf "$DST"
	note "$tag $m: $M_WALL s, $M_CPU CPU-s ($SPLIT_NAMES: $M_SPLIT; other: $M_OTHER)"
}

declare -A WALL CPU SPLIT OTHER

# record METHOD ROUND: keep measure's figures, and append them to runs.tsv.
record() {
	WALL[$1.$2]=$M_WALL CPU[$1.$2]=$M_CPU SPLIT[$1.$2]=$M_SPLIT OTHER[$1]=$M_OTHER
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "$M_WALL" "$M_CPU" "$M_SPLIT" "$M_OTHER" >>"$OUT/runs.tsv"
}

# ---------------------------------------------------------------- set-up

setup() {
	[[ $(id -u) == 0 ]] || die "needs root (network namespaces, accton)"
	[[ -x $BULKMOVE ]] || die "no bulkmove at $BULKMOVE (make build, or set BULKMOVE)"
	[[ $N =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ && $MRUNS =~ ^[1-9][0-9]*$ && $MN =~ ^[1-9][0-9]{3,}$ ]] ||
		die "CPU_N, CPU_RUNS and CPU_MILLION_RUNS must be positive numbers, CPU_MILLION_N at least 1000"
	local t
	for t in tar ssh rsync nc go; do have "$t" || die "$t is missing"; done
	nc -h 2>&1 | grep -q OpenBSD || die "nc is not OpenBSD netcat (apt-get install -y netcat-openbsd)"
	if ! have accton || ! have dump-acct; then
		note "installing acct (process accounting) with apt-get"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq acct; } >&2 ||
			die "cannot install acct"
	fi
	mkdir -p "$W" || die "cannot create $W"
	hosts_up "$W" box1 box2+ssh || die "cannot make the two hosts"
	SSHD_PID=$(cat "$HOSTS_DIR/sshd-box2.pid")
	timeout 20 ip netns exec "${NS[box1]}" ssh -F "$HOSTS_DIR/ssh_config" -o BatchMode=yes "$HOST" true </dev/null ||
		die "ssh $HOST from box1 fails"
	NC_ADDR=$(SSH -G "$HOST" 2>/dev/null | awk '$1 == "hostname" { print $2 }')
	[[ $(stat -f -c %T "$DIR") == tmpfs ]] || note "warning: $DIR is not on a tmpfs"
	case $OUT in / | "$ROOT" | "$ROOT"/* | "$DIR" | "$DIR"/*) die "CPU_OUT must be outside the repository and CPU_DIR" ;; esac
	# What an earlier run left there (not the whole directory: CPU_OUT may be /tmp).
	rm -rf "$OUT"/{acct,logs,million,gentree,floor,report.md,runs.tsv} "$OUT"/*.pprof "$OUT"/*.top.txt
	mkdir -p "$OUT/acct" "$OUT/logs" || die "cannot write $OUT"
	# Named copies: acct tells the two ends apart by command name.
	mkdir -p "$W/bin" && cp "$BULKMOVE" "$W/bin/bm-sender" && cp "$BULKMOVE" "$W/bin/bm-agent" ||
		die "cannot copy bulkmove into $W/bin"
	SENDER=$W/bin/bm-sender AGENT=$W/bin/bm-agent
	GENTREE=$OUT/gentree
	(cd "$ROOT" && go build -o "$GENTREE" ./bench/gentree) || die "cannot build bench/gentree"
	FLOOR=$OUT/floor
	(cd "$ROOT" && go build -o "$FLOOR" ./bench/floor) || die "cannot build bench/floor"
	VERSION=$("$BULKMOVE" --version 2>/dev/null | head -n1)
	REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
	LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	accton off >/dev/null 2>&1
	[[ -n $NC_PID ]] && kill "$NC_PID" 2>/dev/null
	[[ -n $SERVE_PID ]] && kill "$SERVE_PID" 2>/dev/null
	hosts_down
	rm -rf "${W:?}"
	exit "$rc"
}

# gen ARGS...: the tree at SRC; sets NFILES.
gen() {
	rm -rf "$SRC"
	"$GENTREE" -q "$@" -o "$SRC" || die "gentree $* failed"
	NFILES=$(find "$SRC" -type f | wc -l)
	# Touch the tmpfs pages the copies will use (untimed), as bench/run.sh does.
	mkdir -p "$W/dst" && cp -a "$SRC" "$W/dst/warm" && rm -rf "$W/dst/warm"
}

out() { printf '%s\n' "$@" | tee -a "$OUT/report.md"; }

header() {
	: >"$OUT/report.md"
	out "## bulkmove CPU-seconds, $(date -u '+%Y-%m-%d %H:%M UTC')" ""
	out "- command: \`$(env | grep -E '^(CPU_|BULKMOVE=)' | sort | tr '\n' ' ')bench/cpu.sh\`"
	out "- machine: $(uname -srm), $(nproc) CPUs; load average at start $LOAD0"
	out "- bulkmove: $VERSION, repository at commit $REV; $(tar --version | head -n1), $(rsync --version | head -n1 | sed 's/  */ /g'), $(ssh -V 2>&1 | cut -d, -f1)"
	out "- $1"
}

# ---------------------------------------------------------------- 100,000 small files

declare -A PEER=([bm_ssh]=tar_ssh [bm_tls]=tar_nc [bm_tcp]=tar_nc [bm_serve]=tar_nc)
# LOGINS: the SSH logins each method makes (see login).
declare -A LOGINS=([bm_ssh]=1 [bm_tls]=1 [bm_tcp]=1 [tar_ssh]=1 [rsync]=1)

run_small() {
	local r i m ms nm
	read -ra ms <<<"$METHODS"
	nm=${#ms[@]}
	SRC=$W/src
	gen -kind small -n "$N" -dirs $((N / 100)) -size 1024
	note "tree: $NFILES files of 1 KiB in $SRC; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	if ((WARMUP)); then
		for m in "${ms[@]}"; do measure "$m" warmup || die "warm-up run of $m failed (see $OUT/logs)"; done
	fi
	for ((r = 1; r <= RUNS; r++)); do
		for ((i = 0; i < nm; i++)); do
			m=${ms[(i + r - 1) % nm]}
			if measure "$m" "r$r"; then
				record "$m" "$r"
			fi
		done
	done
	((PROFILE)) && profile_run
	report_small
}

# med ARRAY METHOD: the median over the rounds.
med() {
	local -n a=$1
	local r
	for ((r = 1; r <= RUNS; r++)); do [[ -n ${a[$2.$r]:-} ]] && echo "${a[$2.$r]}"; done | median
}

# net METHOD: its median CPU-s less its logins' (the login method's median).
net() {
	awk -v c="$(med CPU "$1")" -v l="$(med CPU login)" -v k="${LOGINS[$1]:-0}" \
		'BEGIN { if (c == "–" || (k > 0 && l == "–")) print "–"; else printf "%.2f", c - k * l }'
}

report_small() {
	local m p w c rc tgt res k i
	header "$NFILES files of 1 KiB (gentree -kind small) on $(stat -f -c %T "$DIR") at $W, between two hosts of the script's own (network namespaces on one bridge, box2's root with a HOME of its own); $RUNS interleaved rounds (order rotated each round), medians; CPU-s = whole-machine busy CPU-s from /proc/stat"
	out "" "| method | wall s | CPU-s | CPU ÷ peer | target | result |" "|---|--:|--:|--:|---|---|"
	for m in $METHODS; do
		w=$(med WALL "$m") c=$(med CPU "$m") p=${PEER[$m]:-} rc="–" tgt="–" res="–"
		if [[ -n $p ]]; then
			rc=$(ratio "$c" "$(med CPU "$p")")
			rc="$rc (${LABEL[$p]//|/\\|})"
			res=FAIL
			case $m in
			bm_ssh) tgt="CPU ≤ 1.0×" && le "${rc%% *}" 1.0 && res=PASS ;;
			bm_tls) tgt="CPU ≤ 1.2×" && le "${rc%% *}" 1.2 && res=PASS ;;
			bm_serve) tgt="CPU ≤ 1.2× (TLS's)" && le "${rc%% *}" 1.2 && res=PASS ;;
			bm_tcp)
				local rw
				rw=$(ratio "$w" "$(med WALL "$p")")
				tgt="CPU ≤ 0.9×, wall ≤ 0.9× (wall: ${rw}×)"
				le "${rc%% *}" 0.9 && le "$rw" 0.9 && res=PASS
				;;
			esac
			[[ ${rc%% *} == "–" ]] && res="not judged (no figures)"
		fi
		out "| \`${LABEL[$m]//|/\\|}\` | $w | $c | $rc | $tgt | $res |"
	done
	if [[ " $METHODS " == *" login "* ]]; then
		out "" "One SSH login (\`ssh box2 true\`, the remote shell's start-up files included) costs $(med CPU login) CPU-s here (median); net of the logins each method makes, and against the floor (the files' calls alone, bench/floor: $(med CPU floor) CPU-s):" ""
		out "| method | logins | CPU-s net | ÷ peer, net | ÷ floor, net |" "|---|--:|--:|--:|--:|"
		for m in $METHODS; do
			[[ $m == login || $m == floor ]] && continue
			p=${PEER[$m]:-} rc="–"
			[[ -n $p ]] && rc=$(ratio "$(net "$m")" "$(net "$p")")
			out "| \`${LABEL[$m]//|/\\|}\` | ${LOGINS[$m]:-0} | $(net "$m") | $rc | $(ratio "$(net "$m")" "$(med CPU floor)") |"
		done
	fi
	out "" "Per-process CPU-s (medians; process accounting: the run's processes by command name; rest = whole machine − these):" ""
	out "| method | sender | agent | sshd | tar | nc | rsync | ssh client | other | processes | rest |" "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	for m in $METHODS; do
		local cells="" sum
		for ((i = 1; i <= 8; i++)); do
			cells+="$(for ((k = 1; k <= RUNS; k++)); do [[ -n ${SPLIT[$m.$k]:-} ]] && echo "${SPLIT[$m.$k]}" | cut -d' ' -f$i; done | median) | "
		done
		sum=$(for ((k = 1; k <= RUNS; k++)); do [[ -n ${SPLIT[$m.$k]:-} ]] && echo "${SPLIT[$m.$k]}" | awk '{ for (i = 1; i <= NF; i++) s += $i; print s }'; done | median)
		local rest
		rest=$(for ((k = 1; k <= RUNS; k++)); do [[ -n ${SPLIT[$m.$k]:-} ]] && echo "${CPU[$m.$k]} ${SPLIT[$m.$k]}" | awk '{ s = 0; for (i = 2; i <= NF; i++) s += $i; printf "%.2f\n", $1 - s }'; done | median)
		out "| \`${LABEL[$m]//|/\\|}\` | $cells$sum | $rest |"
	done
	out "" "The biggest of \"other\" in each method's last run (by command name; a login shell that ends by exec-ing a command is counted as that command, its start-up files' children as other):" ""
	for m in $METHODS; do out "- \`${LABEL[$m]//|/\\|}\`: ${OTHER[$m]:-–}"; done
	out "" "Every run: $OUT/runs.tsv (round, method, wall s, CPU-s, the split in the order above, the biggest of other); logs and acct files in $OUT."
	[[ -f $OUT/sender.top.txt ]] && out "Profiles of one bulkmove SSH run: $OUT/sender.pprof, $OUT/agent-*.pprof; \`go tool pprof -top\` of each in $OUT/sender.top.txt and $OUT/agent.top.txt."
	out ""
}

# profile_run: one bulkmove SSH run with a pprof CPU profile of each end. The agent is
# started by sshd, which passes no environment: --remote-bulkmove names a wrapper that
# sets BULKMOVE_TUNE_CPUPROFILE and execs the agent (not for `version --proto`, the check).
profile_run() {
	local wrap=$W/bin/bm-agent-prof p
	mkdir -p "$W/prof"
	cat >"$wrap" <<-EOF
		#!/bin/sh
		[ "\$1" = version ] || export BULKMOVE_TUNE_CPUPROFILE=$(q "$W/prof/agent-%p.pprof")
		exec $(q "$AGENT") "\$@"
	EOF
	chmod 0755 "$wrap"
	DST=$W/dst/prof
	rm -rf "$DST"
	if ! S env BULKMOVE_TUNE_CPUPROFILE="$W/prof/sender.pprof" "$SENDER" --ssh-config "$HOSTS_DIR/ssh_config" --remote-bulkmove "$wrap" "$SRC" "$HOST:$DST" >"$OUT/logs/profile.log" 2>&1; then
		note "the profiled run failed (see $OUT/logs/profile.log)"
		return 1
	fi
	rm -rf "$DST"
	mv "$W"/prof/*.pprof "$OUT/" || return 1
	go tool pprof -top "$SENDER" "$OUT/sender.pprof" >"$OUT/sender.top.txt" 2>&1
	go tool pprof -top "$AGENT" "$OUT"/agent-*.pprof >"$OUT/agent.top.txt" 2>&1
	for p in sender agent; do
		note "pprof $p: $(grep -m1 '^Duration' "$OUT/$p.top.txt")"
	done
}

# ---------------------------------------------------------------- a million files

m_bm_million() { bm -v; }

run_million() {
	local r i m order slow med mx
	SRC=$W/million
	local need=$((MN * 2 + MN / 250 + 100)) free
	free=$(df --output=iavail "$DIR" | tail -n1)
	((free >= need)) || die "$DIR has $free free inodes, the tree and its copy need about $need"
	gen -kind small -n "$MN" -dirs $((MN / 1000)) -size 100
	note "tree: $NFILES files of 100 bytes in $((MN / 1000)) directories; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	mkdir -p "$OUT/million"
	for ((r = 1; r <= MRUNS; r++)); do
		order="bm_million tar_ssh"
		((r % 2 == 0)) && order="tar_ssh bm_million"
		for m in $order; do
			if measure "$m" "m$r"; then
				record "$m" "$r"
			fi
		done
	done
	RUNS=$MRUNS
	header "$((MN / 1000)) directories × 1,000 files of 100 bytes (gentree -kind small -n $MN -dirs $((MN / 1000)) -size 100) at $W, over SSH (two hosts of the script's own); $MRUNS runs of each, interleaved (bulkmove with its defaults and -v); CPU-s = whole-machine busy CPU-s"
	out "" "| run | bulkmove s | bulkmove CPU-s | bulkmove sender, agent CPU-s | tar \\| ssh s | tar \\| ssh CPU-s |" "|--:|--:|--:|--:|--:|--:|"
	for ((r = 1; r <= MRUNS; r++)); do
		out "| $r | ${WALL[bm_million.$r]:-–} | ${CPU[bm_million.$r]:-–} | $(echo "${SPLIT[bm_million.$r]:-– –}" | cut -d' ' -f1-2 | sed 's/ /, /') | ${WALL[tar_ssh.$r]:-–} | ${CPU[tar_ssh.$r]:-–} |"
	done
	out "" "| method | median s | slowest s | slowest ÷ median | median CPU-s | most CPU-s | target | result |" "|---|--:|--:|--:|--:|--:|---|---|"
	for m in bm_million tar_ssh; do
		med=$(med WALL "$m")
		mx=$(for ((r = 1; r <= MRUNS; r++)); do [[ -n ${WALL[$m.$r]:-} ]] && echo "${WALL[$m.$r]}"; done | maxof)
		slow=$(ratio "${mx:-–}" "$med")
		local tgt="–" res="–"
		if [[ $m == bm_million ]]; then
			tgt="slowest ≤ 1.25× median"
			res=FAIL
			le "$slow" 1.25 && res=PASS
		fi
		out "| \`$([[ $m == tar_ssh ]] && echo 'tar \| ssh box2 tar -x' || echo 'bulkmove SRC box2:DST')\` | $med | ${mx:-–} | $slow | $(med CPU "$m") | $(for ((r = 1; r <= MRUNS; r++)); do [[ -n ${CPU[$m.$r]:-} ]] && echo "${CPU[$m.$r]}"; done | maxof) | $tgt | $res |"
	done
	# Keep the -v logs of bulkmove's slow runs (the slowest, and any above 1.25× the median).
	out ""
	med=$(med WALL bm_million)
	mx=$(for ((r = 1; r <= MRUNS; r++)); do [[ -n ${WALL[bm_million.$r]:-} ]] && echo "${WALL[bm_million.$r]}"; done | maxof)
	for ((r = 1; r <= MRUNS; r++)); do
		[[ -n ${WALL[bm_million.$r]:-} ]] || continue
		if [[ ${WALL[bm_million.$r]} == "$mx" ]] || ! le "$(ratio "${WALL[bm_million.$r]}" "$med")" 1.25; then
			cp "$OUT/logs/m$r-bm_million.log" "$OUT/million/run-$r-slow.log"
			out "- run $r: ${WALL[bm_million.$r]} s ($(ratio "${WALL[bm_million.$r]}" "$med")× the median), its -v log kept: $OUT/million/run-$r-slow.log"
		fi
	done
	out "" "Every run: $OUT/runs.tsv (run, method, wall s, CPU-s, then sender agent sshd tar nc rsync ssh other CPU-s)." ""
}

# ---------------------------------------------------------------- main

main() {
	trap cleanup EXIT
	setup
	trap 'exit 130' INT
	trap 'exit 143' TERM
	if [[ $MILLION == 1 ]]; then
		run_million
	else
		run_small
	fi
}

main "$@"
