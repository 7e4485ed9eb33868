#!/bin/sh
# Turns a freshly bootstrapped Debian root filesystem into the test host.
# Run by mmdebstrap as a customize hook: $1 is the root filesystem, $2 a
# directory prepared by image.py holding the generated keys, the CRI test
# client and one-item-per-line lists of units (see recipe.py).
set -eu

root="$1"
inputs="$2"

in_root() { chroot "$root" "$@"; }

# --- identity -----------------------------------------------------------
hostname="$(cat "$inputs/hostname")"
printf '%s\n' "$hostname" > "$root/etc/hostname"
cat > "$root/etc/hosts" <<EOF
127.0.0.1 localhost
127.0.1.1 $hostname
::1 localhost ip6-localhost ip6-loopback
EOF
# A fixed machine-id: an empty one makes every boot a "first boot", on which
# systemd applies presets and would re-enable units we mask or disable.
cp "$inputs/machine-id" "$root/etc/machine-id"

# --- filesystems --------------------------------------------------------
# The kernel mounts / read-write (root=/dev/vda rw); pass 0 skips an fsck of
# a pristine overlay on every boot.
printf '/dev/vda / ext4 rw,relatime 0 0\n' > "$root/etc/fstab"

# --- network: DHCP from qemu's user-mode network on the virtio NIC --------
cat > "$root/etc/systemd/network/10-testhost.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
# The network is restricted (no route out of qemu): no resolver to ask.
printf '# numa-kubelets test host: no DNS (qemu user networking, restrict=on)\n' \
    > "$root/etc/resolv.conf"

# --- ssh: root by key only, with the host key generated at build time ---
rm -f "$root"/etc/ssh/ssh_host_*
install -m 600 "$inputs/ssh_host_ed25519_key" "$root/etc/ssh/ssh_host_ed25519_key"
install -m 644 "$inputs/ssh_host_ed25519_key.pub" "$root/etc/ssh/ssh_host_ed25519_key.pub"
install -d -m 700 "$root/root/.ssh"
install -m 600 "$inputs/authorized_keys" "$root/root/.ssh/authorized_keys"
cat > "$root/etc/ssh/sshd_config.d/testhost.conf" <<'EOF'
# Only the pinned key, so clients can verify it (hostKey in the stack config).
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
# pulumi-command and the tests open many sessions at once.
MaxSessions 64
MaxStartups 64:30:128
EOF
# Each remote command of a stack opens an SSH connection of its own, and under TCG one cost about
# 1.1 s of emulated CPU (measured on bookworm): about 0.25 s the motd pam_motd makes at every login
# by running /etc/update-motd.d (for people at a terminal; no script reads it), about 0.45 s sshd
# executing itself anew for the connection (every library linked again). Without both, 0.4 s.
# `sshd -r` keeps the forked listener; an sshd that has no such flag any more is left as it is.
sed -i 's/^session[[:space:]].*pam_motd\.so.*/# numa-kubelets test host, no motd: &/' "$root/etc/pam.d/sshd"
mkdir -p "$root/run/sshd" # what `sshd -t` asks for; /run is a tmpfs once booted
if in_root /usr/sbin/sshd -t -r >/dev/null 2>&1; then
    printf '# numa-kubelets test host: no re-execution per connection\nSSHD_OPTS=-r\n' > "$root/etc/default/ssh"
fi
# No usable password for root ('*' matches no password): key login only.
in_root usermod --password '*' root

# --- the CRI test client and its container images (tests/cri) -------------
sh "$inputs/cri/install_in_testhost.sh" "$root" "$inputs/cri"

# --- units ----------------------------------------------------------------
# A CPU quota in force from boot to shutdown: the guard against a qemu multi-threaded TCG bug.
# Setting the first quota (cpu.max) on any cgroup, and removing the last, switches the kernel's
# "cfs bandwidth used" static key, whose jump the kernel then patches live in the scheduler's
# hot path (text_poke_bp). A kubelet sets and removes pod quotas all the time; under qemu 7.2's
# multi-threaded TCG a vCPU may go on running a stale translation of the patched code, and the
# guest loops in `dequeue_task_fair` with a run queue lock held (seen: RCU stalls, soft lockups
# on every vCPU, SSH gone for good). With this quota held the key never falls back to zero, so
# it is patched once, at boot.
cat > "$root/etc/systemd/system/testhost-cpu-quota-pin.service" <<'EOF'
[Unit]
Description=Keeps one CPU quota set, so the scheduler's bandwidth key is patched only at boot (TCG guard)

[Service]
ExecStart=/bin/sleep infinity
CPUQuota=1%

[Install]
WantedBy=multi-user.target
EOF
# The containers still running at shutdown get 5 s after SIGTERM, not systemd's default 90: the
# tests' pods and the pause double run `sleep` as PID 1, which ignores SIGTERM, and every reboot
# waited 90 s on their scopes (measured: 178 s from `systemctl reboot` to SSH, 90 of them here).
# runc's systemd cgroup driver makes one cri-containerd-<id>.scope per container; systemd reads
# this prefix drop-in for every one of them.
mkdir -p "$root/etc/systemd/system/cri-containerd-.scope.d"
cat > "$root/etc/systemd/system/cri-containerd-.scope.d/10-testhost-stop-timeout.conf" <<'EOF'
[Scope]
TimeoutStopSec=5s
EOF
# The Go programs systemd starts (the product's kubelets and containerds, their shims and runc,
# the device plugins) run their goroutines on one OS thread. The guest's vCPUs take turns on one
# host thread (or a few, on two host cores): a Go runtime lock's holder is then often not running,
# and the threads that want the lock spin for it (procyield) on vCPUs that do run. Profiled on the
# trixie machine, an idle real kubelet (two CPUs in its slice) spent 25 % of its CPU time in
# runtime.procyieldAsm and 19 % under runtime.lock2; the lifecycle module alone took 391 core-seconds
# without this, 327 with it. Nothing the tests check depends on how many threads a Go program's
# scheduler uses; pods' containers get the environment their spec gives, not this one.
mkdir -p "$root/etc/systemd/system.conf.d"
cat > "$root/etc/systemd/system.conf.d/10-testhost-go.conf" <<'EOF'
[Manager]
DefaultEnvironment=GOMAXPROCS=1
EOF
for unit in $(cat "$inputs/masked-units"); do
    in_root systemctl mask "$unit"
done
for unit in $(cat "$inputs/enabled-units"); do
    in_root systemctl enable "$unit"
done
# user.slice is up on every host, where logind wants it; the product confines it (host services)
# and the tests look at its cgroup. With logind masked (recipe.py says why) the boot pulls it in.
in_root systemctl add-wants multi-user.target user.slice
# Every `systemctl daemon-reload` (the product's scripts run one each, and an apply runs several)
# runs every system generator again. In this image none but the fstab generator has anything to
# generate from (no crypttab, no GPT partitions, no rc.local, no init.d script without a native
# unit, no resume= or systemd.* kernel arguments, no vsock; the serial console's getty no test
# logs in to), yet each is a process started under emulation: a daemon-reload took 2.9 s, 1.7 s
# with them masked (measured on bookworm). A generator is masked by a link to /dev/null of its name.
mkdir -p "$root/etc/systemd/system-generators"
for generator in "$root"/usr/lib/systemd/system-generators/* "$root"/lib/systemd/system-generators/*; do
    [ -e "$generator" ] || continue
    name=$(basename "$generator")
    [ "$name" = systemd-fstab-generator ] || ln -sfn /dev/null "$root/etc/systemd/system-generators/$name"
done
