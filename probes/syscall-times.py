#!/usr/bin/env python3
"""syscall-times.py TRACE: per thread and system call (x86_64 numbers named), the count, median
and max time from sys_enter to sys_exit (wall time: it includes sleeping in the call)."""
import re, sys, collections, statistics
NAMES = {0:'read',1:'write',3:'close',7:'poll',9:'mmap',10:'mprotect',11:'munmap',12:'brk',
 17:'pread64',18:'pwrite64',35:'nanosleep',39:'getpid',61:'wait4',62:'kill',74:'fsync',
 82:'rename',83:'mkdir',202:'futex',228:'clock_gettime',230:'clock_nanosleep',257:'openat',
 262:'newfstatat',264:'renameat',316:'renameat2',318:'getrandom',332:'statx',435:'clone3',
 56:'clone',59:'execve',231:'exit_group',60:'exit',72:'fcntl',16:'ioctl',8:'lseek',
 217:'getdents64',5:'fstat',4:'stat',6:'lstat',89:'readlink',267:'readlinkat',19:'readv',20:'writev',
 437:'openat2',24:'sched_yield',203:'sched_setaffinity',204:'sched_getaffinity',144:'sched_setscheduler',
 13:'rt_sigaction',14:'rt_sigprocmask',15:'rt_sigreturn',234:'tgkill',186:'gettid',96:'gettimeofday',
 87:'unlink',263:'unlinkat',84:'rmdir',21:'access',269:'faccessat',439:'faccessat2',258:'mkdirat'}
open_ = {}
times = collections.defaultdict(list)
longest = []
pat = re.compile(r'\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): sys_(enter|exit): NR (\d+)')
for l in open(sys.argv[1]):
    m = pat.match(l)
    if not m: continue
    comm, tid, ts, kind, nr = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), int(m.group(5))
    if kind == 'enter': open_[tid] = (ts, nr, comm)
    elif tid in open_:
        t0, nr0, c = open_.pop(tid)
        times[(c, NAMES.get(nr0, str(nr0)))].append((ts - t0) * 1e6)
        longest.append(((ts - t0) * 1e6, t0, c, NAMES.get(nr0, str(nr0))))
rows = sorted(times.items(), key=lambda kv: -max(kv[1]))
print(f"{'thread':16} {'syscall':18} {'n':>7} {'median us':>10} {'p99 us':>9} {'max us':>9}")
for (c, n), v in rows[:40]:
    v.sort()
    print(f"{c:16} {n:18} {len(v):7} {statistics.median(v):10.1f} {v[int(0.99*(len(v)-1))]:9.1f} {v[-1]:9.1f}")
skip = ('nanosleep', 'futex', 'clock_nanosleep', 'wait4', 'poll')
print("\nlongest single calls (not sleeps):")
for d, t0, c, n in sorted((x for x in longest if x[3] not in skip), reverse=True)[:12]:
    print(f"  {d:9.1f} us at {t0:.6f} {c} {n}")
