# bench/lib/hosts.sh: test hosts of a benchmark's own on this machine (sourced; root).
#
# Each host is a network namespace with an eth0 on one bridge (veth, about 10 Gbit/s),
# host i (from 1) at 10.198.0.i; the hosts named NAME+ssh run an sshd of their own
# (their own host key, one user key for all, root logins by key only), reached by name
# through HOSTS_DIR/ssh_config. The namespaces share this machine's filesystem, so a
# path means the same file on every host. The shared rig (../shared/rig) is not touched.
#
#   hosts_up DIR NAME[+ssh]...  make the hosts; keys and configs in DIR/hosts
#   NS[NAME]                    the host's namespace: ip netns exec "${NS[box2]}" ...
#   HOSTS_DIR                   DIR/hosts: ssh_config, known_hosts, id, home-NAME
#   host_cap NAME RATE          cap the host's outgoing traffic with tbf (e.g. 200mbit)
#   host_uncap NAME             remove the cap
#   host_bytes NAME             bytes the kernel counted on the host's eth0, rx + tx
#   hosts_down                  stop the sshds, delete the namespaces (call it on EXIT)
#
# The remote shell's PATH starts with the directory of $BULKMOVE, so `bulkmove` there is
# the binary under test.

declare -A NS=()
HOSTS_ID=bmh$$
HOSTS_DIR=
HOSTS_NAMES=()

hosts_up() {
	local dir=$1 spec name n=1 ssh_hosts=()
	shift
	HOSTS_DIR=$dir/hosts
	mkdir -p "$HOSTS_DIR" /run/sshd
	command -v ip >/dev/null || { echo "hosts: needs ip (iproute2)" >&2; return 1; }
	local sshd
	sshd=$(command -v sshd || echo /usr/sbin/sshd)
	ip netns add "${HOSTS_ID}br" && ip -n "${HOSTS_ID}br" link set lo up || return 1
	ip -n "${HOSTS_ID}br" link add br0 type bridge
	ip -n "${HOSTS_ID}br" link set br0 up
	ssh-keygen -q -t ed25519 -N '' -f "$HOSTS_DIR/id" </dev/null
	: >"$HOSTS_DIR/known_hosts"
	: >"$HOSTS_DIR/ssh_config"
	for spec; do
		name=${spec%+ssh}
		NS[$name]=$HOSTS_ID$n
		HOSTS_NAMES+=("$name")
		ip netns add "${NS[$name]}" && ip -n "${NS[$name]}" link set lo up || return 1
		ip link add "p$n" netns "${HOSTS_ID}br" type veth peer name eth0 netns "${NS[$name]}"
		ip -n "${HOSTS_ID}br" link set "p$n" master br0 up
		ip -n "${NS[$name]}" addr add "10.198.0.$n/24" dev eth0
		ip -n "${NS[$name]}" link set eth0 up
		if [[ $spec == *+ssh ]]; then
			ssh_hosts+=("$name")
			ssh-keygen -q -t ed25519 -N '' -f "$HOSTS_DIR/host-$name" </dev/null
			cp "$HOSTS_DIR/id.pub" "$HOSTS_DIR/ak-$name"
			cat >"$HOSTS_DIR/sshd-$name" <<-CONF
				ListenAddress 10.198.0.$n
				Port 22
				HostKey $HOSTS_DIR/host-$name
				PidFile $HOSTS_DIR/sshd-$name.pid
				AuthorizedKeysFile $HOSTS_DIR/ak-$name
				UsePAM no
				StrictModes no
				PermitRootLogin prohibit-password
				PasswordAuthentication no
				AllowTcpForwarding yes
				SetEnv PATH=$(dirname "${BULKMOVE:-/usr/bin/true}"):/usr/bin:/bin HOME=$HOSTS_DIR/home-$name
			CONF
			mkdir -p "$HOSTS_DIR/home-$name/.ssh"
			echo "10.198.0.$n $(cut -d' ' -f1-2 "$HOSTS_DIR/host-$name.pub")" >>"$HOSTS_DIR/known_hosts"
			printf 'Host %s\n  HostName 10.198.0.%s\n' "$name" "$n" >>"$HOSTS_DIR/ssh_config"
			ip netns exec "${NS[$name]}" "$sshd" -f "$HOSTS_DIR/sshd-$name" || return 1
		fi
		n=$((n + 1))
	done
	cat >>"$HOSTS_DIR/ssh_config" <<-CONF
		Host *
		  User root
		  IdentityFile $HOSTS_DIR/id
		  UserKnownHostsFile $HOSTS_DIR/known_hosts
		  StrictHostKeyChecking yes
	CONF
	# Every host's HOME knows the others, for a login from one to another.
	for name in "${ssh_hosts[@]}"; do cp "$HOSTS_DIR/ssh_config" "$HOSTS_DIR/home-$name/.ssh/config"; done
	local i addr
	for name in "${ssh_hosts[@]}"; do
		addr=$(awk -v h="$name" '$1 == "Host" { on = ($2 == h) } on && $1 == "HostName" { print $2; exit }' "$HOSTS_DIR/ssh_config")
		for ((i = 0; i < 50; i++)); do
			ip netns exec "${NS[$name]}" bash -c "exec 3<>/dev/tcp/$addr/22" 2>/dev/null && break
			sleep 0.1
		done
	done
}

host_cap() { ip netns exec "${NS[$1]}" tc qdisc replace dev eth0 root tbf rate "$2" burst 256kb latency 50ms; }
host_uncap() { ip netns exec "${NS[$1]}" tc qdisc del dev eth0 root 2>/dev/null || true; }
host_bytes() { ip netns exec "${NS[$1]}" sh -c 'echo $(( $(cat /sys/class/net/eth0/statistics/rx_bytes) + $(cat /sys/class/net/eth0/statistics/tx_bytes) ))'; }

hosts_down() {
	local name
	for name in "${HOSTS_NAMES[@]}"; do
		[[ -f $HOSTS_DIR/sshd-$name.pid ]] && kill "$(cat "$HOSTS_DIR/sshd-$name.pid")" 2>/dev/null
		ip netns del "${NS[$name]}" 2>/dev/null
	done
	ip netns del "${HOSTS_ID}br" 2>/dev/null
	[[ -n $HOSTS_DIR ]] && rm -rf "$HOSTS_DIR"
	return 0
}
