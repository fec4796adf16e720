#!/usr/bin/env bash
# Remote-to-remote benchmark: bulkmove box1:SRC box2:DEST run on a control
# host, against a push of the same tree run on box1.
#
# The script makes three hosts of its own, each a network namespace with
# its own sshd, on one bridge (about 10 Gbit/s of veth): the control host
# (10.198.0.1), box1 (.2) and box2 (.3). It times, best of R2R_RUNS each:
#   - the remote-to-remote move, from the control host;
#   - a push run on box1 over the same TLS data plane (--transport tls);
#   - a push run on box1 over SSH (the default);
# and counts, for the remote-to-remote move, the bytes the kernel saw on
# the control host's interfaces (/sys/class/net/*/statistics, lo left out)
# against the bytes that reached box2. The targets: the control host's
# traffic under 1% of the data moved, the time within 10% of the push.
#
#   R2R_TREE  a tree to move (default: made under R2R_DIR: 8 files of
#             128 MiB and 20,000 of 4 KiB)
#   R2R_DIR   scratch on a tmpfs (default /mnt/x/r2r-bench)
#   R2R_J     streams (default 4)       R2R_RUNS  runs (default 3)
#   R2R_OUT   report (default /tmp/bulkmove-r2r.md)
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BULKMOVE=${BULKMOVE:-$ROOT/bin/bulkmove}
DIR=${R2R_DIR:-/mnt/x/r2r-bench}
J=${R2R_J:-4}
RUNS=${R2R_RUNS:-3}
OUT=${R2R_OUT:-/tmp/bulkmove-r2r.md}
die() { echo "r2r: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
command -v ip >/dev/null || die "needs ip (iproute2)"
[[ -x $(command -v sshd || echo /usr/sbin/sshd) ]] || die "needs sshd (openssh-server)"
[[ -x $BULKMOVE ]] || die "no $BULKMOVE (make build)"

# The three hosts: network namespaces on one bridge, an sshd in box1 and box2
# (bench/lib/hosts.sh); box1's HOME knows box2.
. "$ROOT/bench/lib/hosts.sh"
cleanup() {
	hosts_down
	rm -rf "$DIR/dst"*
}
trap cleanup EXIT
hosts_up "$DIR" ctl box1+ssh box2+ssh || die "cannot make the hosts"
CTL=${NS[ctl]} B1=${NS[box1]} B2=${NS[box2]} H=$HOSTS_DIR

SRC=${R2R_TREE:-$DIR/src}
if [[ -z ${R2R_TREE:-} && ! -d $SRC ]]; then
	echo "r2r: making the tree in $SRC" >&2
	(cd "$ROOT" && go run ./bench/gentree -kind large -n 8 -size 128MiB -o "$SRC/large" && go run ./bench/gentree -kind small -n 20000 -size 4KiB -o "$SRC/small")
fi
TREE=$(du -sb "$SRC" | cut -f1)

counters() { # the control host's bytes, rx+tx, lo left out
	ip netns exec "$CTL" sh -c 'for d in /sys/class/net/*; do [ "${d##*/}" = lo ] || echo $(( $(cat $d/statistics/rx_bytes) + $(cat $d/statistics/tx_bytes) )); done' | awk '{s+=$1} END {print s}'
}
rx2() { ip netns exec "$B2" cat /sys/class/net/eth0/statistics/rx_bytes; }

best_r2r= best_tls= best_ssh= ctl_bytes= moved=
for run in $(seq "$RUNS"); do
	rm -rf "$DIR/dst"*
	c0=$(counters) r0=$(rx2)
	t0=$(date +%s.%N)
	ip netns exec "$CTL" "$BULKMOVE" --ssh-config "$H/ssh_config" --journal none -j "$J" "box1:$SRC" "box2:$DIR/dst-r2r" >/dev/null
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	c1=$(counters) r1=$(rx2)
	if [[ -z $best_r2r ]] || (($(echo "$t < $best_r2r" | bc))); then
		best_r2r=$t ctl_bytes=$((c1 - c0)) moved=$((r1 - r0))
	fi
	rm -rf "$DIR/dst"*
	t0=$(date +%s.%N)
	ip netns exec "$B1" env HOME="$H/home-box1" "$BULKMOVE" --ssh-config "$H/ssh_config" --journal none -j "$J" --transport tls "$SRC" "box2:$DIR/dst-tls" >/dev/null
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	[[ -z $best_tls ]] || (($(echo "$t < $best_tls" | bc))) && best_tls=$t
	rm -rf "$DIR/dst"*
	t0=$(date +%s.%N)
	ip netns exec "$B1" env HOME="$H/home-box1" "$BULKMOVE" --ssh-config "$H/ssh_config" --journal none -j "$J" "$SRC" "box2:$DIR/dst-ssh" >/dev/null
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	[[ -z $best_ssh ]] || (($(echo "$t < $best_ssh" | bc))) && best_ssh=$t
done

share=$(echo "scale=4; 100 * $ctl_bytes / $moved" | bc)
vs_tls=$(echo "scale=3; $best_r2r / $best_tls" | bc)
vs_ssh=$(echo "scale=3; $best_r2r / $best_ssh" | bc)
{
	echo "# Remote to remote: box1 -> box2 from a control host"
	echo
	echo "Tree: $TREE bytes ($SRC); -j $J; best of $RUNS; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| run | seconds | remote to remote's time over it |"
	echo "|---|---|---|"
	echo "| remote to remote, from the control host | $best_r2r | 1 |"
	echo "| push on box1, --transport tls | $best_tls | $vs_tls |"
	echo "| push on box1, over SSH | $best_ssh | $vs_ssh |"
	echo
	echo "Bytes that reached box2 (eth0 rx): $moved. The control host's interfaces: $ctl_bytes bytes, $share% of it (target: under 1%)."
	echo "Remote to remote's time over the TLS push's: $vs_tls (target: at most 1.10)."
} | tee "$OUT"
