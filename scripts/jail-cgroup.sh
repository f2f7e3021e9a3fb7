#!/bin/sh
# Delegate a cgroup v2 folder to the worker that scores code tasks, then run the worker in it.
#
#   scripts/jail-cgroup.sh USER COMMAND...
#
# Run as root, as the container's first process, where /sys/fs/cgroup is the container's own
# cgroup v2 tree, writable (compose: `cgroup: private` and the worker's entrypoint; see
# docs/security.md, "Memory cgroups"). It moves every process of the top cgroup into `init`,
# enables the memory and pids controllers, makes `podium` (owned by USER) with the worker's own leaf
# `podium/worker`, and execs COMMAND as USER with PODIUM_JAIL_CGROUP=/sys/fs/cgroup/podium: the
# jails' cgroups are then made beside the worker, inside the folder it owns.
set -eu
user=${1:?usage: jail-cgroup.sh USER COMMAND...}
shift
top=/sys/fs/cgroup
[ "$(stat -fc %T "$top")" = cgroup2fs ] || { echo "jail-cgroup.sh: $top is not a cgroup v2 tree" >&2; exit 1; }
mkdir -p "$top/init" "$top/podium/worker"
while read -r pid; do echo "$pid" > "$top/init/cgroup.procs" 2>/dev/null || true; done < "$top/cgroup.procs"
echo "+memory +pids" > "$top/cgroup.subtree_control"
echo $$ > "$top/podium/worker/cgroup.procs"
echo "+memory +pids" > "$top/podium/cgroup.subtree_control"
chown "$user" "$top/podium" "$top/podium/cgroup.procs" "$top/podium/cgroup.subtree_control" "$top/podium/cgroup.threads" \
  "$top/podium/worker" "$top/podium/worker/cgroup.procs"
export PODIUM_JAIL_CGROUP="$top/podium"
exec setpriv --reuid="$user" --regid="$user" --init-groups -- "$@"
