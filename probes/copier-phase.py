#!/usr/bin/env python3
"""copier-phase.py TRACE [THREAD]: where in the measuring thread's period each system call of
THREAD (default latlab-trace) began, on the CPU it ran on: µs after that CPU's last due time
(the measuring thread's hrtimer_start 'expires' values) and µs before the next. Prints how many
began within 40 µs after a due time or within 100 µs before the next (what latlab_sys::quiet
keeps out), per system call."""
import re, sys, bisect, collections
thread = sys.argv[2] if len(sys.argv) > 2 else 'latlab-trace'
pat = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)')
due = collections.defaultdict(list)   # cpu -> due times (s)
calls = []                            # (cpu, ts, nr)
for l in open(sys.argv[1]):
    m = pat.match(l)
    if not m: continue
    comm, cpu, ts, ev, rest = m.group(1), int(m.group(3)), float(m.group(4)), m.group(5), m.group(6)
    if ev == 'hrtimer_start' and comm.startswith('latlab-cpu') and 'hrtimer_wakeup' in rest:
        e = re.search(r'expires=(\d+)', rest)
        if e: due[int(comm[len('latlab-cpu'):])].append(int(e.group(1)) / 1e9)
    elif ev == 'sys_enter' and comm == thread:
        calls.append((cpu, ts, int(re.search(r'NR (\d+)', rest).group(1))))
for c in due: due[c].sort()
n = collections.Counter(); bad = collections.Counter(); early = collections.Counter()
for cpu, ts, nr in calls:
    d = due.get(cpu)
    if not d: continue
    i = bisect.bisect_right(d, ts)
    if i == 0 or i >= len(d): continue
    after, before = (ts - d[i-1]) * 1e6, (d[i] - ts) * 1e6
    n[nr] += 1
    if after < 40: early[nr] += 1
    if before < 100: bad[nr] += 1
for nr in sorted(n):
    print(f"NR {nr:4}: {n[nr]:7} calls; {early[nr]:6} within 40 us after a due time, {bad[nr]:6} within 100 us before the next")
