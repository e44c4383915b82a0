#!/usr/bin/env python3
# aa.py PAIRS SECONDS: cyclictest against itself (both --mainaffinity 0, CPU 1), alternated pairs, the
# statistics of `latlab bench measure` (1 µs histogram: min = lowest bucket, mean = midpoints, p99 = upper
# bound), to show the spread of per-pair ratios that this machine gives a tool against itself.
import subprocess, sys, statistics, math
def run(secs):
    out = subprocess.run(['cyclictest','-m','-p','95','-i','1000','-a','1','-t','1','-q','-h','10000',
                          '-D',f'{secs}s','--mainaffinity=0'], capture_output=True, text=True, check=True).stdout
    counts = [0]*10000; ovf = 0
    for l in out.splitlines():
        if l.startswith('# Histogram Overflows:'): ovf = int(l.split()[3])
        elif not l.startswith('#'):
            p = l.split()
            if len(p) >= 2 and int(p[0]) < 10000: counts[int(p[0])] += int(p[1])
    n = sum(counts) + ovf
    mn = next(i for i, c in enumerate(counts) if c)
    mean = (sum(c*(i+.5) for i, c in enumerate(counts)) + ovf*10000) / n
    rank = max(1, math.ceil(n*0.99)); cum = 0
    for i, c in enumerate(counts):
        cum += c
        if cum >= rank: p99 = i+1; break
    else: p99 = 10000
    return mn, mean, p99
pairs, secs = int(sys.argv[1]), int(sys.argv[2])
r = {'mean': [], 'p99': [], 'min': []}
for k in range(pairs):
    a, b = run(secs), run(secs)
    if k % 2: a, b = b, a
    for name, i in (('min', 0), ('mean', 1), ('p99', 2)): r[name].append(a[i]/b[i])
    print(f'pair {k+1}: A min {a[0]} mean {a[1]:.1f} p99 {a[2]} | B min {b[0]} mean {b[1]:.1f} p99 {b[2]}', flush=True)
for name in ('mean', 'p99', 'min'):
    v = r[name]; print(f'{name}: median A/B {statistics.median(v):.3f} ({min(v):.3f}–{max(v):.3f})')
