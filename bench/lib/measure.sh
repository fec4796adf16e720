# bench/lib/measure.sh: clocks, CPU counters and medians shared by the benchmarks (sourced).

now_us() {
	local t=$EPOCHREALTIME
	echo $((10#${t%.*} * 1000000 + 10#${t#*.}))
}

# busy_ticks: busy time of all CPUs since boot, in clock ticks (user nice system irq
# softirq steal; guest time is inside user).
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# median [FORMAT]: of the numbers on stdin (the mean of the middle two for an even
# count), printed with FORMAT (default %.2f).
median() { sort -g | awk -v f="${1:-%.2f}\n" '{ a[NR] = $1 } END { if (NR == 0) print "–"; else if (NR % 2) printf f, a[(NR + 1) / 2]; else printf f, (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
maxof() { sort -g | tail -n1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "–" || b == "–" || b <= 0) print "–"; else printf "%.2f", a / b }'; }
le() { awk -v x="$1" -v f="$2" 'BEGIN { exit !(x != "–" && x <= f) }'; }

# listening PORT PID: wait (up to 5 s) until a socket listens on PORT in PID's network
# namespace. Read from /proc/PID/net/tcp{,6} in this shell: an `ip netns exec ... ss` a
# poll would add its CPU to the method's.
listening() {
	local hex i f addr st
	printf -v hex ':%04X' "$1"
	for ((i = 0; i < 250; i++)); do
		for f in "/proc/$2/net/tcp" "/proc/$2/net/tcp6"; do
			while read -r _ addr _ st _; do
				[[ $addr == *"$hex" && $st == 0A ]] && return 0
			done <"$f"
		done 2>/dev/null
		sleep 0.02
	done
	printf 'nothing listened on port %s in the namespace of process %s\n' "$1" "$2" >&2
	return 1
}
