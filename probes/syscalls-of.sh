#!/bin/bash
# syscalls-of.sh PID SECONDS OUT: every system call of PID's threads (raw_syscalls, filtered on
# their tids as they are when it starts) and the timers they arm (hrtimer_start: the measuring
# threads' due times), in a PRIVATE tracefs instance (never the top-level buffer), removed
# afterwards. Then: probes/syscall-times.py OUT, probes/copier-phase.py OUT.
set -eu
if [ -z "${MEASURE_NS:-}" ]; then exec unshare -m --propagation private env MEASURE_NS=1 "$0" "$@"; fi
mkdir -p /tmp/measure-tracefs && mount -t tracefs nodev /tmp/measure-tracefs
PID=$1 SECS=$2 OUT=$3
T=/tmp/measure-tracefs
I=$T/instances/measure-sys-$$
mkdir "$I"
trap 'echo 0 > "$I/tracing_on" || true; echo 0 > "$I/events/enable" || true; rmdir "$I"' EXIT
echo 0 > "$I/tracing_on"
echo mono > "$I/trace_clock"
echo 16384 > "$I/buffer_size_kb"
tids=$(ls /proc/$PID/task | tr '\n' ' ')
f=""; for t in $tids; do f="${f:+$f || }common_pid == $t"; done
for e in raw_syscalls/sys_enter raw_syscalls/sys_exit timer/hrtimer_start; do
  echo "$f" > "$I/events/$e/filter"
  echo 1 > "$I/events/$e/enable"
done
echo 1 > "$I/tracing_on"
sleep "$SECS"
echo 0 > "$I/tracing_on"
cat "$I/trace" > "$OUT"
