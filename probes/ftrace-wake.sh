#!/bin/bash
# ftrace-wake.sh CPU SECONDS OUT: the wake-path events on CPU (function tracing is refused here: EPERM),
# in a PRIVATE tracefs instance (never the top-level buffer); the instance is removed afterwards.
set -eu
# Own mount of tracefs in a private mount namespace (others may unmount /sys/kernel/tracing).
if [ -z "${MEASURE_NS:-}" ]; then exec unshare -m --propagation private env MEASURE_NS=1 "$0" "$@"; fi
mkdir -p /tmp/measure-tracefs && mount -t tracefs nodev /tmp/measure-tracefs
CPU=$1 SECS=$2 OUT=$3
T=/tmp/measure-tracefs
I=$T/instances/measure-probe-$$
mkdir "$I"
trap 'echo 0 > "$I/tracing_on" || true; echo 0 > "$I/events/enable" || true; rmdir "$I"' EXIT
echo 0 > "$I/tracing_on"
echo mono > "$I/trace_clock"
echo 8192 > "$I/buffer_size_kb"
printf '%x\n' $((1 << CPU)) > "$I/tracing_cpumask"
for e in sched/sched_switch sched/sched_waking sched/sched_wakeup irq_vectors/local_timer_entry irq_vectors/local_timer_exit \
         timer/hrtimer_expire_entry timer/hrtimer_expire_exit timer/hrtimer_start x86_fpu rseq exceptions/page_fault_user \
         raw_syscalls/sys_enter raw_syscalls/sys_exit power/cpu_idle irq_vectors/call_function_single_entry irq_vectors/reschedule_entry ipi; do
  echo 1 > "$I/events/$e/enable"
done
echo 1 > "$I/tracing_on"
sleep "$SECS"
echo 0 > "$I/tracing_on"
cat "$I/per_cpu/cpu$CPU/trace" > "$OUT"
