/* wake-phase CPU SECONDS PHASE_US: wake-loop.c (FIFO 95 on CPU, main thread on CPU 0, /dev/cpu_dma_latency 0)
 * with the schedule starting at a whole millisecond + PHASE_US; prints the figures of the samples whose
 * intended time is a multiple of 4 ms (HZ=250: the tick's own time) and of the others, separately. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
#include <pthread.h>
static int64_t ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static int cpu, secs, phase;
static void* loop(void*a){
  (void)a;
  cpu_set_t s;CPU_ZERO(&s);CPU_SET(cpu,&s);sched_setaffinity(0,sizeof s,&s);
  struct sched_param p={.sched_priority=95};sched_setscheduler(0,SCHED_FIFO,&p);
  int64_t t=(ns()/1000000+10)*1000000+phase*1000LL; int64_t end=t+secs*1000000000LL;
  int64_t mn[2]={1<<30,1<<30},sum[2]={0,0},n[2]={0,0};
  while(t<end){struct timespec ts={t/1000000000LL,t%1000000000LL};clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&ts,NULL);
    int64_t l=ns()-t; int k=(t%4000000)==0; if(l<mn[k])mn[k]=l; sum[k]+=l;n[k]++; t+=1000000;}
  printf("phase %4d us: on the tick n %6ld min %5.1f mean %5.1f | off the tick n %6ld min %5.1f mean %5.1f | all mean %5.1f\n",
    phase,(long)n[1],n[1]?mn[1]/1e3:0,n[1]?sum[1]/1e3/n[1]:0,(long)n[0],mn[0]/1e3,sum[0]/1e3/n[0],(sum[0]+sum[1])/1e3/(n[0]+n[1]));
  return 0;}
int main(int argc,char**argv){
  if(argc<4){fprintf(stderr,"usage: wake-phase CPU SECONDS PHASE_US\n");return 1;}
  cpu=atoi(argv[1]); secs=atoi(argv[2]); phase=atoi(argv[3]);
  mlockall(MCL_CURRENT|MCL_FUTURE);
  int fd=open("/dev/cpu_dma_latency",O_RDWR); int32_t z=0; if(write(fd,&z,4)!=4) perror("cpu_dma_latency");
  cpu_set_t s;CPU_ZERO(&s);CPU_SET(0,&s);sched_setaffinity(0,sizeof s,&s);
  pthread_t th; pthread_create(&th,0,loop,0); pthread_join(th,0); return 0;}
