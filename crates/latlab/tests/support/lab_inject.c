/* Ground-truth injectors for the kernel lab's attribution tests (crates/latlab/tests/lab_rt.rs),
 * built there with `gcc -static -O2 -pthread` and run in the guest. Each pins itself to a CPU
 * and runs for a number of seconds; what it did, with CLOCK_MONOTONIC times (the trace clock
 * latlab's recorder uses), goes to a log the test reads.
 *
 *   lab_inject hog CPU PRIO BURST_US PERIOD_MS SECONDS LOG
 *       SCHED_FIFO PRIO, comm lab-hog: every PERIOD_MS a busy burst of BURST_US; `pid TID`,
 *       then, when it ends, one line per burst: `burst WAKE START END` (ns: the timer's
 *       expiry, the first instant the hog saw, the burst's end).
 *   lab_inject pi CPU SECONDS LOG
 *       priority inheritance: pi-low (SCHED_OTHER) takes a PTHREAD_PRIO_INHERIT mutex and
 *       spins 25 ms holding it, every 35 ms; pi-high (SCHED_FIFO 97) waits until pi-low holds
 *       it, then blocks on it (the kernel boosts pi-low to FIFO 97). Lines: `pids LOW HIGH`,
 *       then `hold START END` per hold.
 *   lab_inject udp CPU PRIO BURST_US PERIOD_MS SECONDS LOG
 *       SCHED_FIFO PRIO, comm lab-udp: every PERIOD_MS, BURST_US (and at least 16) of UDP
 *       datagrams to itself over loopback (their NET_RX softirq runs in its context on
 *       PREEMPT_RT); `pid TID`, then `burst START END sent N` per burst.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void sleep_until(uint64_t t) {
    struct timespec ts = {.tv_sec = t / 1000000000ull, .tv_nsec = t % 1000000000ull};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s))
        die("sched_setaffinity");
}

static void fifo(int prio) {
    struct sched_param p = {.sched_priority = prio};
    if (sched_setscheduler(0, SCHED_FIFO, &p))
        die("sched_setscheduler");
}

static void spin_until(uint64_t t) {
    while (now() < t) {
    }
}

static FILE *open_log(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        die(path);
    setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

static int hog(int cpu, int prio, long burst_us, long period_ms, int seconds, const char *log) {
    FILE *f = open_log(log);
    pin(cpu);
    prctl(PR_SET_NAME, "lab-hog");
    fifo(prio);
    fprintf(f, "pid %ld\n", (long)syscall(SYS_gettid));
    uint64_t end = now() + (uint64_t)seconds * 1000000000ull;
    uint64_t next = now() + 50000000ull;
    /* The bursts are logged at the end: a line written to the 9p share after each burst
     * kept the hog on the CPU for milliseconds more under TCG (charged 34 ms for a logged
     * 27 ms burst), time the log did not show. */
    size_t n = 0, cap = (size_t)seconds * 1000 / (size_t)period_ms + 2;
    uint64_t (*b)[3] = calloc(cap, sizeof *b);
    if (!b)
        die("calloc");
    while (next < end && n < cap) {
        sleep_until(next);
        uint64_t a = now();
        spin_until(a + (uint64_t)burst_us * 1000);
        b[n][0] = next;
        b[n][1] = a;
        b[n][2] = now();
        n++;
        next += (uint64_t)period_ms * 1000000ull;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(f, "burst %llu %llu %llu\n", (unsigned long long)b[i][0],
                (unsigned long long)b[i][1], (unsigned long long)b[i][2]);
    return 0;
}

static pthread_mutex_t lock;
static atomic_int holding;
static atomic_int done;
static FILE *pilog;
static int picpu;
static atomic_long tid_low, tid_high;

static void *pi_low(void *arg) {
    (void)arg;
    pin(picpu);
    prctl(PR_SET_NAME, "pi-low");
    atomic_store(&tid_low, syscall(SYS_gettid));
    while (!atomic_load(&done)) {
        pthread_mutex_lock(&lock);
        uint64_t a = now();
        atomic_store(&holding, 1);
        spin_until(a + 25000000ull);
        atomic_store(&holding, 0);
        uint64_t b = now();
        pthread_mutex_unlock(&lock);
        fprintf(pilog, "hold %llu %llu\n", (unsigned long long)a, (unsigned long long)b);
        usleep(10000);
    }
    return NULL;
}

static void *pi_high(void *arg) {
    (void)arg;
    pin(picpu);
    prctl(PR_SET_NAME, "pi-high");
    fifo(97);
    atomic_store(&tid_high, syscall(SYS_gettid));
    while (!atomic_load(&done)) {
        while (!atomic_load(&holding) && !atomic_load(&done))
            usleep(500);
        pthread_mutex_lock(&lock); /* blocks: pi-low is boosted to FIFO 97 */
        pthread_mutex_unlock(&lock);
        while (atomic_load(&holding) && !atomic_load(&done))
            usleep(500);
    }
    return NULL;
}

static int pi(int cpu, int seconds, const char *log) {
    pilog = open_log(log);
    picpu = cpu;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT))
        die("PTHREAD_PRIO_INHERIT");
    pthread_mutex_init(&lock, &a);
    pthread_t l, h;
    if (pthread_create(&l, NULL, pi_low, NULL) || pthread_create(&h, NULL, pi_high, NULL))
        die("pthread_create");
    while (!atomic_load(&tid_low) || !atomic_load(&tid_high))
        usleep(1000);
    fprintf(pilog, "pids %ld %ld\n", atomic_load(&tid_low), atomic_load(&tid_high));
    sleep(seconds);
    atomic_store(&done, 1);
    pthread_join(l, NULL);
    pthread_join(h, NULL);
    return 0;
}

static int udp(int cpu, int prio, long burst_us, long period_ms, int seconds, const char *log) {
    FILE *f = open_log(log);
    pin(cpu);
    prctl(PR_SET_NAME, "lab-udp");
    fprintf(f, "pid %ld\n", (long)syscall(SYS_gettid));
    int rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int tx = socket(AF_INET, SOCK_DGRAM, 0);
    if (rx < 0 || tx < 0)
        die("socket");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (bind(rx, (struct sockaddr *)&addr, sizeof addr) || getsockname(rx, (struct sockaddr *)&addr, &len))
        die("bind");
    fifo(prio);
    char buf[1024];
    memset(buf, 'x', sizeof buf);
    uint64_t end = now() + (uint64_t)seconds * 1000000000ull;
    uint64_t next = now() + 50000000ull;
    while (next < end) {
        sleep_until(next);
        uint64_t a = now();
        long sent = 0;
        /* At least 16 datagrams per burst, whatever the time: under TCG the guest's clock
         * runs on while a loaded host keeps QEMU's vCPU off the CPU, and a burst measured in
         * time alone then sent 0 or 1 datagram (seen: `sent 1` in 36 ms), with no NET_RX for
         * the test to find (a CI run's 8 traced spikes showed none). */
        while (now() < a + (uint64_t)burst_us * 1000 || sent < 16) {
            if (sendto(tx, buf, sizeof buf, 0, (struct sockaddr *)&addr, sizeof addr) > 0)
                sent++;
            while (recv(rx, buf, sizeof buf, 0) > 0) {
            }
        }
        fprintf(f, "burst %llu %llu sent %ld\n", (unsigned long long)a, (unsigned long long)now(), sent);
        next += (uint64_t)period_ms * 1000000ull;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 8 && !strcmp(argv[1], "hog"))
        return hog(atoi(argv[2]), atoi(argv[3]), atol(argv[4]), atol(argv[5]), atoi(argv[6]), argv[7]);
    if (argc == 5 && !strcmp(argv[1], "pi"))
        return pi(atoi(argv[2]), atoi(argv[3]), argv[4]);
    if (argc == 8 && !strcmp(argv[1], "udp"))
        return udp(atoi(argv[2]), atoi(argv[3]), atol(argv[4]), atol(argv[5]), atoi(argv[6]), argv[7]);
    fprintf(stderr, "usage: lab_inject hog|pi|udp ... (see the source)\n");
    return 2;
}
