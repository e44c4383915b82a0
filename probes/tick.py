import re,sys
# tick.py TRACE COMM: of the timer interrupts that wake COMM, how many also run the tick (tick_nohz_handler)
tr,comm=sys.argv[1],sys.argv[2]
irq=None; n=both=0; before=0
for l in open(tr):
    if 'local_timer_entry' in l: irq=[]; continue
    if irq is None: continue
    if 'hrtimer_expire_entry' in l: irq.append('tick' if 'tick_nohz_handler' in l else 'wake')
    if f'sched_waking: comm={comm} ' in l: irq.append('W')
    if 'local_timer_exit' in l:
        if 'W' in irq:
            n+=1
            if 'tick' in irq: both+=1; before+= irq.index('tick')<irq.index('W')
        irq=None
print(f'{comm}: {n} wake-ups by the timer IRQ, {both} in the same IRQ as the tick ({before} with the tick first)')
