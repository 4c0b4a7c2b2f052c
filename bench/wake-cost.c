/*
 * What the same work costs on this machine when it resumes after a wait.
 *
 * Runs a fixed piece of work (hashing a buffer of KIB KiB read out of order, REPS times) UNITS
 * times, each after sleeping SLEEP_MS (0: back to back), and prints the thread CPU time per
 * piece. A turn of the engine is such pieces between model calls, so this is the part of the
 * rise of its CPU with the model's latency that no change to the engine can remove.
 *
 *   gcc -O2 -o /tmp/wake-cost bench/wake-cost.c
 *   /tmp/wake-cost 512 3 0 40; /tmp/wake-cost 512 3 200 40
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint64_t work(const uint8_t *buf, size_t n, int reps) {
    uint64_t h = 1469598103934665603ULL;
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i += 16) {
            h ^= buf[(i * 7919) % n];
            h *= 1099511628211ULL;
        }
    return h;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s KIB REPS SLEEP_MS UNITS\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atoi(argv[1]) * 1024;
    int reps = atoi(argv[2]), sleep_ms = atoi(argv[3]), units = atoi(argv[4]);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || n == 0 || units <= 0) {
        fprintf(stderr, "KIB and UNITS must be positive\n");
        return 2;
    }
    memset(buf, 1, n);
    uint64_t sink = 0;
    double total = 0;
    for (int u = 0; u < units; u++) {
        if (sleep_ms) {
            struct timespec s = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
            nanosleep(&s, NULL);
        }
        double start = thread_cpu_ms();
        sink += work(buf, n, reps);
        total += thread_cpu_ms() - start;
    }
    printf("%s KiB x %d after %d ms: %.3f ms of CPU per piece (%llu)\n", argv[1], reps, sleep_ms, total / units,
           (unsigned long long)(sink & 1));
    free(buf);
    return 0;
}
