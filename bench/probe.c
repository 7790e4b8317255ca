/*
 * bench/probe.c -- this machine's limits, printed as one JSON object.
 *
 * Built and run by bench/probe.py (gcc -O3 -march=native -ffp-contract=off
 * -fno-tree-vectorize -pthread).  It measures:
 *
 *   - read bandwidth: a read-only AVX2 integer sum over a large buffer (>= 2 GiB
 *     by default, well past the last-level cache), pages touched before timing,
 *     the buffer split into one contiguous slice per thread; best of several
 *     passes, of a plain loop and of one with software prefetch (the faster
 *     is the figure; both are reported).  The sum is checked against the
 *     known fill pattern, so a pass that did not read every byte cannot
 *     report a number.
 *   - peak f32 arithmetic: separate _mm256_mul_ps + _mm256_add_ps (the
 *     arithmetic the bitwise schedules use: one multiply and one add per lane,
 *     no FMA), _mm256_fmadd_ps, and _mm512_fmadd_ps when __AVX512F__ is defined;
 *   - int8 dot products: _mm256_dpbusd_avx_epi32 (AVX-VNNI) and
 *     _mm512_dpbusd_epi32 (AVX512-VNNI) when compiled in; one vpdpbusd on 8
 *     lanes is 32 multiply-adds, counted as 64 int8 ops;
 *   - the core clock, from a chain of dependent 1-cycle integer adds.
 *
 * Every compute kernel keeps enough independent accumulators in registers to
 * cover latency x throughput of its instruction.  Operands come from volatile
 * globals (the compiler cannot know their values), results go to volatile
 * sinks, and the mul+add kernel passes its multiplicand through an empty asm
 * each step so the product is recomputed rather than hoisted out of the loop.
 * Each thread count runs the same per-thread work in every thread, timed from a
 * shared barrier to the last thread's finish.
 *
 * The machine is shared, so every figure is the best pass, and each pass is
 * marked clean when every thread was on a CPU for >= 95 % of its run and the
 * threads started together.
 * A measurement runs at least --passes passes and keeps going (up to 4x) until
 * min(3, passes) were clean; the JSON reports passes run and clean passes.
 * Compute kernels also report their best rate per second of the thread's own
 * CPU time, and the clock is measured the same way, so rate / clock (ops per
 * cycle) is meaningful even when other processes took the cores.
 *
 * Usage: probe [--threads 1,2] [--bytes N] [--passes P] [--seconds S] [--quick]
 *              [--no-hugepage]
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PROBE_VERSION 3
#define MAX_THREADS 256
#define MAX_COUNTS 16
#define MAX_PASSES 256
#define PREFETCH_BYTES 4096

/* Runtime operands: volatile so the compiler cannot constant-fold them. */
static volatile float g_fa = 1e-8f, g_fb = 1e-8f, g_facc = 1.0f;
static volatile int g_ia = 1, g_ib = 1;
static volatile double g_sink_f;
static volatile uint64_t g_sink_u;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define REP16(X) REP12(X) X(12) X(13) X(14) X(15)

/* ---- f32: separate multiply and add, 12 chains, 192 flop per iteration ---- */
/*
 * Each accumulator goes through an empty asm after initialisation, so the
 * compiler cannot prove two chains equal and merge them into one.
 */
#define MA_DECL(k)                            \
    __m256 acc##k = _mm256_set1_ps(g_facc);   \
    __asm__ volatile("" : "+x"(acc##k));
#define MA_STEP(k)                                  \
    {                                               \
        __m256 t = _mm256_mul_ps(a, b);             \
        acc##k = _mm256_add_ps(acc##k, t);          \
        __asm__ volatile("" : "+x"(a));             \
    }
#define SUM8(k) s = _mm256_add_ps(s, acc##k);
__attribute__((noinline)) static double k_mul_add(uint64_t iters) {
    __m256 a = _mm256_set1_ps(g_fa), b = _mm256_set1_ps(g_fb);
    REP12(MA_DECL)
    for (uint64_t i = 0; i < iters; i++) {
        REP12(MA_STEP)
    }
    __m256 s = _mm256_setzero_ps();
    REP12(SUM8)
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

/* ---- f32 FMA on 8 lanes, 12 chains, 192 flop per iteration ---- */
#define FMA_STEP(k) acc##k = _mm256_fmadd_ps(a, b, acc##k);
__attribute__((noinline)) static double k_fma256(uint64_t iters) {
    __m256 a = _mm256_set1_ps(g_fa), b = _mm256_set1_ps(g_fb);
    REP12(MA_DECL)
    for (uint64_t i = 0; i < iters; i++) {
        REP12(FMA_STEP)
    }
    __m256 s = _mm256_setzero_ps();
    REP12(SUM8)
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

#ifdef __AVX512F__
/* ---- f32 FMA on 16 lanes, 16 chains, 512 flop per iteration ---- */
#define Z_DECL(k)                             \
    __m512 acc##k = _mm512_set1_ps(g_facc);   \
    __asm__ volatile("" : "+v"(acc##k));
#define Z_STEP(k) acc##k = _mm512_fmadd_ps(a, b, acc##k);
#define Z_SUM(k) s = _mm512_add_ps(s, acc##k);
__attribute__((noinline)) static double k_fma512(uint64_t iters) {
    __m512 a = _mm512_set1_ps(g_fa), b = _mm512_set1_ps(g_fb);
    REP16(Z_DECL)
    for (uint64_t i = 0; i < iters; i++) {
        REP16(Z_STEP)
    }
    __m512 s = _mm512_setzero_ps();
    REP16(Z_SUM)
    return (double)_mm512_reduce_add_ps(s);
}
#endif

#ifdef __AVXVNNI__
/* ---- int8 AVX-VNNI on 8 lanes, 12 chains, 12 x 64 int8 ops per iteration ---- */
#define V_DECL(k)                             \
    __m256i acc##k = _mm256_setzero_si256();  \
    __asm__ volatile("" : "+x"(acc##k));
#define V_STEP(k) acc##k = _mm256_dpbusd_avx_epi32(acc##k, a, b);
#define V_SUM(k) s = _mm256_add_epi32(s, acc##k);
__attribute__((noinline)) static double k_vnni256(uint64_t iters) {
    __m256i a = _mm256_set1_epi8((char)g_ia), b = _mm256_set1_epi8((char)g_ib);
    REP12(V_DECL)
    for (uint64_t i = 0; i < iters; i++) {
        REP12(V_STEP)
    }
    __m256i s = _mm256_setzero_si256();
    REP12(V_SUM)
    return (double)(uint32_t)_mm256_extract_epi32(s, 0);
}
#endif

#ifdef __AVX512VNNI__
/* ---- int8 AVX512-VNNI on 16 lanes, 16 chains, 16 x 128 int8 ops per iteration ---- */
#define W_DECL(k)                             \
    __m512i acc##k = _mm512_setzero_si512();  \
    __asm__ volatile("" : "+v"(acc##k));
#define W_STEP(k) acc##k = _mm512_dpbusd_epi32(acc##k, a, b);
#define W_SUM(k) s = _mm512_add_epi32(s, acc##k);
__attribute__((noinline)) static double k_vnni512(uint64_t iters) {
    __m512i a = _mm512_set1_epi8((char)g_ia), b = _mm512_set1_epi8((char)g_ib);
    REP16(W_DECL)
    for (uint64_t i = 0; i < iters; i++) {
        REP16(W_STEP)
    }
    __m512i s = _mm512_setzero_si512();
    REP16(W_SUM)
    return (double)(uint32_t)_mm512_reduce_add_epi32(s);
}
#endif

/*
 * ---- core clock: 100 dependent 1-cycle adds per iteration ----
 * Register-register adds: recent Intel cores fold "add reg, imm" chains at
 * rename (zero latency), which would read as an impossible clock.
 */
__attribute__((noinline)) static double k_clock(uint64_t iters) {
    uint64_t x = g_sink_u, one = (uint64_t)g_ia;
    for (uint64_t i = 0; i < iters; i++) {
        __asm__ volatile(".rept 100\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(one));
    }
    return (double)x;
}

typedef double (*kernel_fn)(uint64_t);

typedef struct {
    const char *name;
    const char *unit;     /* "flop" or "int8_op" */
    const char *instr;
    int accumulators;
    double ops_per_iter;  /* per thread */
    kernel_fn fn;
} kernel_t;

static const kernel_t KERNELS[] = {
    {"mul_add_f32x8", "flop", "_mm256_mul_ps + _mm256_add_ps", 12, 12.0 * 16, k_mul_add},
    {"fma_f32x8", "flop", "_mm256_fmadd_ps", 12, 12.0 * 16, k_fma256},
#ifdef __AVX512F__
    {"fma_f32x16", "flop", "_mm512_fmadd_ps", 16, 16.0 * 32, k_fma512},
#endif
#ifdef __AVXVNNI__
    {"vnni_i8x32", "int8_op", "_mm256_dpbusd_avx_epi32", 12, 12.0 * 64, k_vnni256},
#endif
#ifdef __AVX512VNNI__
    {"vnni_i8x64", "int8_op", "_mm512_dpbusd_epi32", 16, 16.0 * 128, k_vnni512},
#endif
};
#define N_KERNELS ((int)(sizeof(KERNELS) / sizeof(KERNELS[0])))

/* ---- threads: one job per thread, released together by a barrier ---- */
typedef struct {
    pthread_barrier_t *barrier;
    kernel_fn fn;          /* compute job, or NULL for the bandwidth job */
    uint64_t iters;
    const uint8_t *begin;  /* bandwidth job: [begin, end) */
    const uint8_t *end;
    int prefetch;          /* bandwidth job: software prefetch on */
    double t0, t1;
    double cpu;            /* this thread's CPU seconds over [t0, t1] */
    uint64_t sum;
    double fsink;
} job_t;

/*
 * The read loop, with or without software prefetch PREFETCH_BYTES ahead (one
 * prefetch per 64-byte line; a prefetch past the end of the buffer cannot
 * fault). One core's stream is limited by how many misses it keeps in
 * flight, and the hardware prefetcher alone left ~7 % on the table here.
 */
static inline __attribute__((always_inline)) uint64_t sum_slice_impl(const uint8_t *begin,
                                                                     const uint8_t *end,
                                                                     const int prefetch) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    __m256i s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (const uint8_t *p = begin; p < end; p += 256) {
        if (prefetch) {
            _mm_prefetch((const char *)p + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)p + PREFETCH_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)p + PREFETCH_BYTES + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)p + PREFETCH_BYTES + 192, _MM_HINT_T0);
        }
        s0 = _mm256_add_epi32(s0, _mm256_load_si256((const __m256i *)(p + 0)));
        s1 = _mm256_add_epi32(s1, _mm256_load_si256((const __m256i *)(p + 32)));
        s2 = _mm256_add_epi32(s2, _mm256_load_si256((const __m256i *)(p + 64)));
        s3 = _mm256_add_epi32(s3, _mm256_load_si256((const __m256i *)(p + 96)));
        s4 = _mm256_add_epi32(s4, _mm256_load_si256((const __m256i *)(p + 128)));
        s5 = _mm256_add_epi32(s5, _mm256_load_si256((const __m256i *)(p + 160)));
        s6 = _mm256_add_epi32(s6, _mm256_load_si256((const __m256i *)(p + 192)));
        s7 = _mm256_add_epi32(s7, _mm256_load_si256((const __m256i *)(p + 224)));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)),
                                 _mm256_add_epi32(_mm256_add_epi32(s4, s5), _mm256_add_epi32(s6, s7)));
    uint32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, s);
    uint32_t total = 0;
    for (int i = 0; i < 8; i++) total += lanes[i];
    return total;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sum_slice(const uint8_t *begin, const uint8_t *end) {
    return sum_slice_impl(begin, end, 0);
}

static uint64_t sum_slice_prefetch(const uint8_t *begin, const uint8_t *end) {
    return sum_slice_impl(begin, end, 1);
}

static void *worker(void *arg) {
    job_t *job = (job_t *)arg;
    pthread_barrier_wait(job->barrier);
    double c0 = thread_cpu_s();
    job->t0 = now_s();
    if (job->fn) {
        job->fsink = job->fn(job->iters);
    } else {
        job->sum = job->prefetch ? sum_slice_prefetch(job->begin, job->end)
                                 : sum_slice(job->begin, job->end);
    }
    job->t1 = now_s();
    job->cpu = thread_cpu_s() - c0;
    return NULL;
}

/*
 * Run one pass on n threads; returns wall seconds (first start to last end).
 * *clean is set when every thread was on a CPU for >= 95 % of its own run and
 * all threads started within 5 % of the pass time of each other (no other
 * process of this machine took a core or delayed a start). Threads may still
 * finish at different times: equal slices need not take equal time.
 */
static double run_pass(int n, job_t *jobs, int *clean) {
    pthread_t tids[MAX_THREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        jobs[i].barrier = &barrier;
        if (pthread_create(&tids[i], NULL, worker, &jobs[i]) != 0) {
            fprintf(stderr, "probe: pthread_create failed\n");
            exit(2);
        }
    }
    for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&barrier);
    double t0 = jobs[0].t0, t1 = jobs[0].t1;
    for (int i = 1; i < n; i++) {
        if (jobs[i].t0 < t0) t0 = jobs[i].t0;
        if (jobs[i].t1 > t1) t1 = jobs[i].t1;
    }
    double last_start = t0;
    for (int i = 0; i < n; i++)
        if (jobs[i].t0 > last_start) last_start = jobs[i].t0;
    *clean = last_start - t0 <= 0.05 * (t1 - t0);
    for (int i = 0; i < n; i++)
        if (jobs[i].cpu < 0.95 * (jobs[i].t1 - jobs[i].t0)) *clean = 0;
    return t1 - t0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double best_of(const double *v, int n) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > best) best = v[i];
    return best;
}

/*
 * Run at least `passes` passes; on a busy machine keep going (up to 4x) until
 * min(3, passes) of them were clean, so a quiet moment is more likely caught.
 */
static int more_passes(int done, int passes, int clean) {
    int want = passes < 3 ? passes : 3;
    int cap = 4 * passes < MAX_PASSES ? 4 * passes : MAX_PASSES;
    return done < passes || (clean < want && done < cap);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Single-thread calibration: iterations that make one pass last ~seconds. */
static uint64_t calibrate(kernel_fn fn, double seconds) {
    uint64_t iters = 1000;
    for (;;) {
        double t0 = now_s();
        g_sink_f = fn(iters);
        double dt = now_s() - t0;
        if (dt >= seconds / 8 || iters > (UINT64_C(1) << 40)) {
            double scaled = (double)iters * seconds / (dt > 1e-9 ? dt : 1e-9);
            return scaled < 1000 ? 1000 : (uint64_t)scaled;
        }
        iters *= 4;
    }
}

/*
 * Rates (ops/s) for one kernel on n threads: best and median over passes of
 * the wall-clock rate, the number of clean passes, and the best single-thread
 * rate per second of that thread's own CPU time (immune to other processes
 * taking the core; the physical plausibility check uses it).
 */
static void measure_kernel(kernel_fn fn, double ops_per_iter, uint64_t iters, int n, int passes,
                           double *best, double *median, int *n_clean, double *best_cpu,
                           int *n_run) {
    job_t jobs[MAX_THREADS];
    double rates[MAX_PASSES];
    *n_clean = 0;
    *best_cpu = 0;
    int p = 0;
    for (; more_passes(p, passes, *n_clean); p++) {
        memset(jobs, 0, sizeof(job_t) * (size_t)n);
        for (int i = 0; i < n; i++) {
            jobs[i].fn = fn;
            jobs[i].iters = iters;
        }
        int clean;
        double wall = run_pass(n, jobs, &clean);
        *n_clean += clean;
        for (int i = 0; i < n; i++) {
            g_sink_f = jobs[i].fsink;
            double cpu_rate = ops_per_iter * (double)iters / (jobs[i].cpu > 1e-9 ? jobs[i].cpu : 1e-9);
            if (cpu_rate > *best_cpu) *best_cpu = cpu_rate;
        }
        rates[p] = ops_per_iter * (double)iters * n / wall;
    }
    *n_run = p;
    *best = best_of(rates, p);
    *median = median_of(rates, p);
}

/*
 * Bandwidth on n threads, plain loop (v = 0) and with software prefetch
 * (v = 1), passes alternating between the two so both see the same machine:
 * best and median GB/s of each, passes run and clean passes (per variant,
 * counted together), and *ok = every pass summed to the right total.
 */
static void measure_bandwidth(const uint8_t *buf, size_t bytes, int n, int passes, double best[2],
                              double median[2], int *n_clean, int *ok, int *n_run) {
    job_t jobs[MAX_THREADS];
    static double rates[2][MAX_PASSES];
    int runs[2] = {0, 0}, clean_of[2] = {0, 0};
    size_t chunk = (bytes / (size_t)n) & ~(size_t)255;
    uint64_t expected = (uint32_t)(bytes / 4); /* every u32 word is 1 */
    *ok = 1;
    for (int p = -2;; p++) { /* passes -2, -1: untimed warm-up of each variant */
        int v = p & 1;
        if (p >= 0 && !more_passes(runs[v], passes, clean_of[v])) break;
        memset(jobs, 0, sizeof(job_t) * (size_t)n);
        for (int i = 0; i < n; i++) {
            jobs[i].begin = buf + chunk * (size_t)i;
            jobs[i].end = (i == n - 1) ? buf + bytes : buf + chunk * (size_t)(i + 1);
            jobs[i].prefetch = v;
        }
        int clean;
        double wall = run_pass(n, jobs, &clean);
        uint32_t total = 0;
        for (int i = 0; i < n; i++) total += (uint32_t)jobs[i].sum;
        g_sink_u = total;
        if (total != (uint32_t)expected) *ok = 0;
        if (p >= 0) {
            clean_of[v] += clean;
            rates[v][runs[v]++] = (double)bytes / wall / 1e9;
        }
    }
    for (int v = 0; v < 2; v++) {
        best[v] = best_of(rates[v], runs[v]);
        median[v] = median_of(rates[v], runs[v]);
    }
    *n_clean = clean_of[0] + clean_of[1];
    *n_run = runs[0] + runs[1];
}

static int parse_threads(const char *s, int *out) {
    int n = 0;
    while (*s && n < MAX_COUNTS) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_THREADS) return -1;
        out[n++] = (int)v;
        s = (*end == ',') ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void usage(void) {
    fprintf(stderr, "usage: probe [--threads 1,2] [--bytes N] [--passes P] [--seconds S] [--quick]"
                    " [--no-hugepage] [--bandwidth-only]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int counts[MAX_COUNTS] = {1};
    int n_counts = 1;
    size_t bytes = (size_t)2 << 30;
    int passes = 10;
    double seconds = 0.1;
    int quick = 0, bytes_given = 0, passes_given = 0, seconds_given = 0, want_hugepage = 1;
    int bandwidth_only = 0; /* no clock, no compute kernels: bench run's in-run bandwidth */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--no-hugepage")) {
            want_hugepage = 0;
        } else if (!strcmp(argv[i], "--bandwidth-only")) {
            bandwidth_only = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--threads")) {
            n_counts = parse_threads(argv[++i], counts);
            if (n_counts < 1) usage();
        } else if (i + 1 < argc && !strcmp(argv[i], "--bytes")) {
            bytes = (size_t)strtoull(argv[++i], NULL, 10);
            bytes_given = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--passes")) {
            passes = atoi(argv[++i]);
            passes_given = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--seconds")) {
            seconds = atof(argv[++i]);
            seconds_given = 1;
        } else {
            usage();
        }
    }
    if (quick) {
        if (!bytes_given) bytes = (size_t)64 << 20;
        if (!passes_given) passes = 2;
        if (!seconds_given) seconds = 0.01;
    }
    const size_t align = (size_t)2 << 20;
    bytes = (bytes + align - 1) / align * align;
    if (passes < 1 || passes > 64 || seconds <= 0 || bytes < align) usage();

    /* Buffer: 2 MiB aligned, transparent huge pages requested (unless --no-hugepage),
     * every page touched before any timing. */
    uint8_t *buf = aligned_alloc(align, bytes);
    if (!buf) {
        fprintf(stderr, "probe: cannot allocate %zu bytes\n", bytes);
        return 2;
    }
    int hugepage = want_hugepage && madvise(buf, bytes, MADV_HUGEPAGE) == 0;
    if (!want_hugepage) madvise(buf, bytes, MADV_NOHUGEPAGE);
    uint32_t *words = (uint32_t *)buf;
    for (size_t i = 0; i < bytes / 4; i++) words[i] = 1;

    /* Clock: best of passes on one thread. */
    double ghz = 0, ghz_median = 0, ghz_cpu = 0;
    int ghz_clean = 0, ghz_run = 0;
    if (!bandwidth_only) {
        uint64_t clock_iters = calibrate(k_clock, seconds);
        measure_kernel(k_clock, 100.0, clock_iters, 1, passes, &ghz, &ghz_median, &ghz_clean,
                       &ghz_cpu, &ghz_run);
    }

    printf("{\n  \"probe_version\": %d,\n  \"quick\": %s,\n", PROBE_VERSION, quick ? "true" : "false");
    printf("  \"buffer_bytes\": %zu,\n  \"hugepage_advice\": %s,\n", bytes, hugepage ? "true" : "false");
    printf("  \"passes\": %d,\n  \"seconds_per_pass\": %g,\n", passes, seconds);
    printf("  \"bandwidth_only\": %s,\n", bandwidth_only ? "true" : "false");
    printf("  \"ghz\": %.4f,\n  \"ghz_cpu\": %.4f,\n  \"ghz_clean_passes\": %d,\n", ghz / 1e9,
           ghz_cpu / 1e9, ghz_clean);
    printf("  \"bandwidth\": [");
    for (int c = 0; c < n_counts; c++) {
        double best[2], med[2];
        int ok, clean, run;
        measure_bandwidth(buf, bytes, counts[c], passes, best, med, &clean, &ok, &run);
        int v = best[1] > best[0]; /* the faster loop is the machine's figure */
        printf("%s\n    {\"threads\": %d, \"gbs\": %.4f, \"gbs_median\": %.4f, "
               "\"loop\": \"%s\", \"gbs_plain\": %.4f, \"gbs_prefetch\": %.4f, "
               "\"passes_run\": %d, \"clean_passes\": %d, \"verified\": %s}",
               c ? "," : "", counts[c], best[v], med[v], v ? "prefetch" : "plain", best[0],
               best[1], run, clean, ok ? "true" : "false");
    }
    printf("\n  ],\n  \"kernels\": [");
    for (int k = 0; k < (bandwidth_only ? 0 : N_KERNELS); k++) {
        const kernel_t *kern = &KERNELS[k];
        uint64_t iters = calibrate(kern->fn, seconds);
        for (int c = 0; c < n_counts; c++) {
            double best, med, best_cpu;
            int clean, run;
            measure_kernel(kern->fn, kern->ops_per_iter, iters, counts[c], passes, &best, &med,
                           &clean, &best_cpu, &run);
            printf("%s\n    {\"name\": \"%s\", \"unit\": \"%s\", \"instr\": \"%s\", "
                   "\"accumulators\": %d, \"ops_per_iter\": %.0f, \"threads\": %d, "
                   "\"gops\": %.4f, \"gops_median\": %.4f, \"passes_run\": %d, "
                   "\"clean_passes\": %d, \"thread_gops_per_cpu_s\": %.4f}",
                   (k || c) ? "," : "", kern->name, kern->unit, kern->instr, kern->accumulators,
                   kern->ops_per_iter, counts[c], best / 1e9, med / 1e9, run, clean,
                   best_cpu / 1e9);
        }
    }
    printf("\n  ]\n}\n");
    free(buf);
    return 0;
}
