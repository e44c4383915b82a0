import re,sys,collections
# seq.py TRACE PID: what thread PID does from switch-in to switch-out, per wake-up (event names), counted.
tr,pid=sys.argv[1],sys.argv[2]
seqs=collections.Counter(); cur=None; xf=collections.Counter(); run=[]
for l in open(tr):
    m=re.search(r'\s(\d+\.\d+): (\w+): (.*)',l)
    if not m: continue
    ts,ev,body=float(m.group(1)),m.group(2),m.group(3)
    if ev=='sched_switch' and f'next_pid={pid} ' in body: cur=[]; t0=ts; continue
    if cur is None: continue
    if ev=='sched_switch' and f'prev_pid={pid} ' in body:
        seqs[' '.join(cur)]+=1; run.append(ts-t0); cur=None; continue
    if ev.startswith('x86_fpu'):
        xf[re.search(r'xfeatures: (\w+)',body).group(1)]+=1
    if ev in('sys_enter','sys_exit'): ev+='('+re.search(r'NR (\d+)',body).group(1)+')'
    cur.append(ev)
for s,n in seqs.most_common(6): print(n,s)
print('xfeatures',dict(xf))
run.sort(); print('on-CPU per wake-up (µs, trace clock): median %.1f p90 %.1f n %d'%(run[len(run)//2]*1e6,run[int(len(run)*.9)]*1e6,len(run)))
