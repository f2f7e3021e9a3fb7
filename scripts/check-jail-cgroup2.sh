#!/usr/bin/env bash
# Run scripts/jail-cgroup.sh, and the jail's tests under it, on a pure cgroup v2 host: a small VM.
#
#   bash scripts/check-jail-cgroup2.sh            # the probe, then the jail's test files, as worker "podium"
#   bash scripts/check-jail-cgroup2.sh --probe    # the probe only (about a minute)
#
# The compose images delegate a cgroup v2 folder to the worker (docs/security.md, "Memory cgroups"); hosts
# with cgroup v1 or hybrid hierarchies (these CI machines) cannot show that path. This boots Debian's own
# kernel in QEMU (TCG; PODIUM_VM_ACCEL=kvm where nested KVM works) with the host's root as a read-only 9p file system, private
# /tmp and /run, and a cgroup v2 tree with every controller. There, as PID 1 of the VM, it runs
# scripts/jail-cgroup.sh exactly as the compose entrypoint does, which execs the worker as the
# unprivileged user "podium"; the worker then runs the probe below (jails made inside the delegated
# folder, memory bounded for a jail's processes together, the folders removed afterwards) and pytest
# on the jail's test files (all but the network test, whose control connects to Redis and PostgreSQL
# outside the jail: the VM has no network). Needs root; installs qemu-system-x86, linux-image-amd64 and busybox-static
# from Debian's packages when missing (about 200 MB). Exit 0 only when the VM says everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=all
case "${1:-}" in
  "") ;;
  --probe) MODE=probe ;;
  *) echo "usage: bash scripts/check-jail-cgroup2.sh [--probe]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "check-jail-cgroup2.sh: run it as root (it installs packages and builds a VM image)" >&2; exit 1; }
[ -x .venv/bin/python ] || { echo "check-jail-cgroup2.sh: no .venv here: run make test (or make demo) first" >&2; exit 1; }
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1 || true)
if ! command -v qemu-system-x86_64 >/dev/null || [ -z "$kernel" ] || [ ! -x /bin/busybox ] || ! command -v bwrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    qemu-system-x86 linux-image-amd64 busybox-static bubblewrap libseccomp2 >/dev/null
  kernel=$(ls /boot/vmlinuz-* | sort -V | tail -1)
fi
version=${kernel#/boot/vmlinuz-}
work=$(mktemp -d /tmp/podium-cgroup2-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Stage 1, the initramfs: busybox, the 9p and virtio modules, an init that mounts the host's root.
mkdir -p "$work/ir/bin" "$work/ir/mods" "$work/ir/proc" "$work/ir/sys" "$work/ir/dev" "$work/ir/newroot"
cp /bin/busybox "$work/ir/bin/"
modules=()
while read -r _ path; do
  name=$(basename "$path"); name=${name%.ko*}
  case " ${modules[*]:-} " in *" $name "*) continue ;; esac
  case "$path" in *.xz) xz -dc "$path" > "$work/ir/mods/$name.ko" ;; *) cp "$path" "$work/ir/mods/$name.ko" ;; esac
  modules+=("$name")
done < <(for m in virtio_pci 9pnet_virtio 9p; do modprobe -S "$version" --show-depends "$m" | grep '^insmod'; done)
cat > "$work/ir/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
for m in ${modules[*]}; do insmod /mods/\$m.ko; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot || { echo "VM-RESULT: no 9p root"; poweroff -f; }
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash $work/stage2.sh
EOF
chmod +x "$work/ir/init"
(cd "$work/ir" && find . | cpio -o -H newc 2>/dev/null | gzip) > "$work/initramfs.gz"

# Stage 2, on the host's root inside the VM: private /tmp and /run, cgroup v2, the worker user.
cat > "$work/stage2.sh" <<EOF
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs tmpfs /run; cp $work/probe.py /run/probe.py
mount -t tmpfs tmpfs /tmp; mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo; echo "vm: kernel \$(uname -r); /sys/fs/cgroup is \$(stat -fc %T /sys/fs/cgroup) with \$(cat /sys/fs/cgroup/cgroup.controllers)"
# The venv's Python lives under /root (0700 on the host): show the worker only /root/.pyenv.
if [ -d /root/.pyenv ]; then
  mkdir -p /run/pyenv && mount --bind /root/.pyenv /run/pyenv && mount -t tmpfs -o mode=755 tmpfs /root &&
    mkdir /root/.pyenv && mount --bind /run/pyenv /root/.pyenv
fi
cp /etc/passwd /run/passwd; cp /etc/group /run/group
echo "podium:x:1000:1000::/tmp:/bin/sh" >> /run/passwd; echo "podium:x:1000:" >> /run/group
mount --bind /run/passwd /etc/passwd; mount --bind /run/group /etc/group
mkdir -p /tmp/var && chown podium /tmp/var
cd $ROOT
export HOME=/tmp PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 PODIUM_VAR_DIR=/tmp/var
sh scripts/jail-cgroup.sh podium bash -c '
  echo "worker: uid \$(id -u), \$(cat /proc/self/cgroup), PODIUM_JAIL_CGROUP=\$PODIUM_JAIL_CGROUP"
  .venv/bin/python /run/probe.py || exit 1
  [ "$MODE" = probe ] && exit 0
  .venv/bin/python -m pytest -p no:cacheprovider -q tests/evalcore/jail/test_jail_attacks.py \
    tests/evalcore/jail/test_sandbox.py tests/evalcore/jail/test_sandbox_hostile.py \
    tests/evalcore/jail/test_verdicts.py tests/evalcore/jail/test_jail_objects.py \
    --deselect tests/evalcore/jail/test_sandbox_hostile.py::test_no_network_even_with_raw_sockets 2>&1 | tail -30
  exit \${PIPESTATUS[0]}'
status=\$?
[ "\$status" = 0 ] && echo "VM-RESULT: ok" || echo "VM-RESULT: failed (exit \$status)"
echo o > /proc/sysrq-trigger
EOF

# The probe, as the worker: jails inside the delegated folder, a memory limit for the jail as a whole.
cat > "$work/probe.py" <<'EOF'
import os

from evalcore.jail.sandbox import require_jail, run_program

top = os.environ["PODIUM_JAIL_CGROUP"]
jail = require_jail()
assert jail.cgroups is not None and jail.cgroups.description == f"cgroup v2 memory+pids at {top}", jail.cgroups
print("probe: jails in", jail.cgroups.description)
simple = run_program("print(sum(range(10)))", timeout=60, memory_mb=256)
assert simple.passed and simple.stdout == "45\n" and simple.limits == jail.cgroups.description, simple
hog = """
import os, time
for _ in range(4):
    if os.fork() == 0:
        block = bytearray(150 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(5)
        os._exit(0)
print([os.wait()[1] for _ in range(4)])
"""
held = run_program(hog, timeout=120, memory_mb=256)
print("probe: four processes of 150 MiB under memory_mb=256:", held.status, "-", held.detail)
assert held.status == "failed" and "out of memory" in held.detail, held
left = sorted(n for n in os.listdir(top) if os.path.isdir(os.path.join(top, n)))
print("probe: folders left in", top, left)
assert left == ["worker"], left
print("probe: ok")
EOF

# TCG by default: KVM is faster where it works, but on these CI machines (themselves VMs) /dev/kvm exists
# and the guest hung at boot. PODIUM_VM_ACCEL=kvm picks it.
accel=${PODIUM_VM_ACCEL:-tcg}
case "$accel" in tcg|kvm) ;; *) echo "PODIUM_VM_ACCEL must be tcg or kvm, not '$accel'" >&2; exit 2 ;; esac
echo "check-jail-cgroup2.sh: booting $kernel ($accel), mode $MODE"
timeout "${PODIUM_VM_TIMEOUT:-1800}" qemu-system-x86_64 -accel "$accel" -m 3072 -smp 2 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initramfs.gz" -append "console=ttyS0 quiet panic=-1" \
  -fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=root,mount_tag=hostroot </dev/null 2>&1 | tr -d '\r' | tee "$work/console.log" |
  grep -a --line-buffered -E '^(vm|worker|probe|VM-RESULT):|passed|failed|error|Error' || true
grep -aq '^VM-RESULT: ok' "$work/console.log"
