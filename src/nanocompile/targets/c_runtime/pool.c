/* ---- nanocompile thread pool (src/nanocompile/backend/pool.py) ---- */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200112L
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NC_POOL_MAX_THREADS 256
#ifndef NC_POOL_SPIN_NS
#define NC_POOL_SPIN_NS 50000 /* how long a waiting thread polls before it sleeps */
#endif
#ifndef NC_POOL_RELAX
#define NC_POOL_RELAX() sched_yield() /* between two polls (bench/pool_bench.py varies it) */
#endif
#define NC_POOL_MAX_CPUS 4096
#define NC_POOL_CHUNK_BITS 16 /* ticket = generation << 16 | chunks (0 = stop) */
#define NC_POOL_CHUNK_MASK ((UINT64_C(1) << NC_POOL_CHUNK_BITS) - 1)

typedef void (*nc_task_fn)(void *ctx, int64_t begin, int64_t end);

typedef struct {
  pthread_mutex_t ctl;      /* lifecycle: start, stop, thread count (taken before dispatch) */
  pthread_mutex_t dispatch; /* one parallel loop at a time */
  pthread_mutex_t lock;     /* guards the sleeps on wake and done */
  pthread_cond_t wake;      /* workers: the ticket changed */
  pthread_cond_t done;      /* caller: pending reached 0 */
  _Alignas(64) atomic_uint_fast64_t ticket;
  _Alignas(64) atomic_int pending; /* worker chunks of the current loop not yet done */
  _Alignas(64) atomic_int sleepers; /* workers in (or entering) the wake wait */
  atomic_int caller_sleeping;
  _Alignas(64) atomic_int threads;  /* running thread count including the caller, 0: stopped */
  atomic_int final;                 /* the destructor ran: never start again */
  atomic_int_fast64_t created;      /* worker threads created since load */
  /* the current loop, written by the caller before it publishes the ticket */
  nc_task_fn fn;
  void *ctx;
  int64_t n;
  int64_t spin_ns;
  uint64_t base_ticket; /* the ticket when the workers were created */
  int32_t requested;    /* nc_pool_set_threads' count, 0: the default */
  int32_t atfork_registered;
  int32_t env_warned;
  pthread_t tid[NC_POOL_MAX_THREADS];
} nc_pool_state;

static nc_pool_state nc_pool_g = {
    .ctl = PTHREAD_MUTEX_INITIALIZER,
    .dispatch = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};
static _Thread_local int32_t nc_pool_tid = 0;   /* 0: a caller thread; i: worker i */
static _Thread_local int32_t nc_pool_depth = 0; /* > 0 while running a task */
static _Thread_local int32_t nc_pool_fork_locked = 0;

static int64_t nc_pool_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waiting threads first spin for up to spin_ns, calling sched_yield between
   reads rather than a pause instruction: on a shared machine the thread we
   wait for is often runnable on our own CPU, and a pause loop would keep it off
   until the budget ran out (measured: 104 us per loop instead of 1.4 us, see
   docs/threads.md); on an idle CPU sched_yield returns at once. */
static uint64_t nc_pool_spin_ticket(uint64_t value, int64_t spin_ns) {
  uint64_t t = atomic_load_explicit(&nc_pool_g.ticket, memory_order_acquire);
  if (t != value || spin_ns <= 0) return t;
  const int64_t until = nc_pool_now_ns() + spin_ns;
  for (uint32_t i = 1;; ++i) {
    NC_POOL_RELAX();
    t = atomic_load_explicit(&nc_pool_g.ticket, memory_order_acquire);
    if (t != value || ((i & 3) == 0 && nc_pool_now_ns() > until)) return t;
  }
}

static int nc_pool_spin_pending(int64_t spin_ns) {
  int p = atomic_load_explicit(&nc_pool_g.pending, memory_order_acquire);
  if (p == 0 || spin_ns <= 0) return p;
  const int64_t until = nc_pool_now_ns() + spin_ns;
  for (uint32_t i = 1;; ++i) {
    NC_POOL_RELAX();
    p = atomic_load_explicit(&nc_pool_g.pending, memory_order_acquire);
    if (p == 0 || ((i & 3) == 0 && nc_pool_now_ns() > until)) return p;
  }
}

/* Chunk i of k over [0, n): the first n % k chunks are one longer. */
static inline void nc_pool_chunk(int64_t n, int32_t k, int32_t i, int64_t *begin,
                                 int64_t *end) {
  const int64_t base = n / k, rem = n % k;
  *begin = (int64_t)i * base + (i < rem ? i : rem);
  *end = *begin + base + (i < rem ? 1 : 0);
}

static inline int32_t nc_pool_chunks(int64_t n, int64_t grain, int32_t threads) {
  const int64_t by_grain = n / (grain < 1 ? 1 : grain);
  if (threads < 1 || by_grain <= 1) return 1;
  return by_grain < threads ? (int32_t)by_grain : threads;
}

/* Waiting threads spin first; the sleep protocol is a Dekker pair on seq_cst
   atomics: a waiter counts itself in (sleepers / caller_sleeping) and then
   re-reads the condition, the waker changes the condition and then reads the
   count, so one of them sees the other; the wait and the broadcast happen
   under `lock`, so no wake-up is lost. */
static void nc_pool_publish(uint64_t ticket) {
  atomic_store(&nc_pool_g.ticket, ticket);
  if (atomic_load(&nc_pool_g.sleepers) > 0) {
    pthread_mutex_lock(&nc_pool_g.lock);
    pthread_cond_broadcast(&nc_pool_g.wake);
    pthread_mutex_unlock(&nc_pool_g.lock);
  }
}

static uint64_t nc_pool_wait_ticket(uint64_t seen) {
  uint64_t t = nc_pool_spin_ticket(seen, nc_pool_g.spin_ns);
  if (t != seen) return t;
  pthread_mutex_lock(&nc_pool_g.lock);
  atomic_fetch_add(&nc_pool_g.sleepers, 1);
  while ((t = atomic_load(&nc_pool_g.ticket)) == seen)
    pthread_cond_wait(&nc_pool_g.wake, &nc_pool_g.lock);
  atomic_fetch_sub(&nc_pool_g.sleepers, 1);
  pthread_mutex_unlock(&nc_pool_g.lock);
  return t;
}

static void nc_pool_finish_chunk(void) {
  if (atomic_fetch_sub(&nc_pool_g.pending, 1) == 1 && atomic_load(&nc_pool_g.caller_sleeping)) {
    pthread_mutex_lock(&nc_pool_g.lock);
    pthread_cond_signal(&nc_pool_g.done);
    pthread_mutex_unlock(&nc_pool_g.lock);
  }
}

static void nc_pool_wait_done(void) {
  if (nc_pool_spin_pending(nc_pool_g.spin_ns) == 0) return;
  pthread_mutex_lock(&nc_pool_g.lock);
  atomic_store(&nc_pool_g.caller_sleeping, 1);
  while (atomic_load(&nc_pool_g.pending) != 0)
    pthread_cond_wait(&nc_pool_g.done, &nc_pool_g.lock);
  atomic_store(&nc_pool_g.caller_sleeping, 0);
  pthread_mutex_unlock(&nc_pool_g.lock);
}

static void nc_pool_run_chunk(int64_t n, int32_t k, int32_t i, nc_task_fn fn, void *ctx) {
  int64_t begin, end;
  nc_pool_chunk(n, k, i, &begin, &end);
  ++nc_pool_depth;
  fn(ctx, begin, end);
  --nc_pool_depth;
}

/* a worker's name, as ps -L, top -H and gdb show it: "ncpool<tag>-<id>", the tag
   (20 bits of this library's pool's address, in hex) telling the pools of two
   libraries in one process apart; given by the thread that creates the worker,
   so it holds when the start returns (glibc's, declared here: this file asks
   for POSIX only) */
extern int pthread_setname_np(pthread_t thread, const char *name);

static unsigned nc_pool_tag(void) {
  return (unsigned)(((uintptr_t)&nc_pool_g >> 6) & 0xFFFFFu);
}

static void nc_pool_name(pthread_t thread, int32_t id) {
  char name[16];
  snprintf(name, sizeof name, "ncpool%05x-%u", nc_pool_tag() & 0xFFFFFu,
           (unsigned)id & 0xFFu); /* id < NC_POOL_MAX_THREADS (256): 15 characters */
  (void)pthread_setname_np(thread, name); /* a name is a courtesy: no failure */
}

static void *nc_pool_worker(void *arg) {
  const int32_t id = (int32_t)(intptr_t)arg;
  nc_pool_tid = id;
  uint64_t seen = nc_pool_g.base_ticket; /* written before pthread_create */
  for (;;) {
    seen = nc_pool_wait_ticket(seen);
    const int32_t k = (int32_t)(seen & NC_POOL_CHUNK_MASK);
    if (k == 0) return NULL; /* stop */
    if (id < k) { /* the job fields are stable until every participant finished */
      nc_pool_run_chunk(nc_pool_g.n, k, id, nc_pool_g.fn, nc_pool_g.ctx);
      nc_pool_finish_chunk();
    }
  }
}

/* -- thread count ------------------------------------------------------- */

static int nc_pool_read_int(const char *path, long *out) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  const int ok = fscanf(f, "%ld", out) == 1;
  fclose(f);
  return ok;
}

/* The CPUs this process may run on, from /proc/self/status; count or 0. */
static int32_t nc_pool_allowed_cpus(int32_t *cpus, int32_t max) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[8192];
  int32_t count = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Cpus_allowed_list:", 18) != 0) continue;
    char *p = line + 18;
    for (;;) {
      while (*p == ' ' || *p == '\t' || *p == ',') ++p;
      if (*p < '0' || *p > '9') break;
      char *q;
      long lo = strtol(p, &q, 10), hi = lo;
      if (*q == '-') hi = strtol(q + 1, &q, 10);
      p = q;
      for (long c = lo; c <= hi && c < NC_POOL_MAX_CPUS && count < max; ++c)
        cpus[count++] = (int32_t)c;
    }
    break;
  }
  fclose(f);
  return count;
}

/* Physical cores among the allowed CPUs (*logical gets the CPU count), or 0. */
static int32_t nc_pool_physical_cores(int32_t *logical) {
  static int32_t cpus[NC_POOL_MAX_CPUS];
  static int64_t cores[NC_POOL_MAX_CPUS];
  const int32_t n = nc_pool_allowed_cpus(cpus, NC_POOL_MAX_CPUS);
  *logical = n;
  int32_t distinct = 0;
  for (int32_t i = 0; i < n; ++i) {
    char path[128];
    long core, package;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", (int)cpus[i]);
    if (!nc_pool_read_int(path, &core)) return 0;
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", (int)cpus[i]);
    if (!nc_pool_read_int(path, &package)) return 0;
    const int64_t key = ((int64_t)package << 32) | (int64_t)(uint32_t)core;
    int32_t j = 0;
    while (j < distinct && cores[j] != key) ++j;
    if (j == distinct) cores[distinct++] = key;
  }
  return distinct;
}

static int32_t nc_pool_clamp(long n) {
  return n < 1 ? 1 : (n > NC_POOL_MAX_THREADS ? NC_POOL_MAX_THREADS : (int32_t)n);
}

/* NANOCOMPILE_THREADS if it is an integer in 1..256 (-1 when set but invalid, 0 unset). */
static int32_t nc_pool_env_threads(void) {
  const char *s = getenv("NANOCOMPILE_THREADS");
  if (s == NULL || *s == '\0') return 0;
  long v = 0;
  const char *p = s;
  while (*p == ' ') ++p;
  const char *digits = p;
  while (*p >= '0' && *p <= '9' && v <= NC_POOL_MAX_THREADS) v = v * 10 + (*p++ - '0');
  while (*p == ' ') ++p;
  if (p == digits || *p != '\0' || v < 1 || v > NC_POOL_MAX_THREADS) return -1;
  return (int32_t)v;
}

/* Called with ctl held (it reads and writes env_warned). */
static int32_t nc_pool_default_threads(int32_t *logical) {
  int32_t cpus = 0;
  const int32_t physical = nc_pool_physical_cores(&cpus);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  *logical = cpus > 0 ? cpus : (online > 0 ? (int32_t)online : 1);
  const int32_t fallback = physical > 0 ? nc_pool_clamp(physical) : nc_pool_clamp(online);
  const int32_t env = nc_pool_env_threads();
  if (env > 0) return env;
  if (env < 0 && !nc_pool_g.env_warned) {
    nc_pool_g.env_warned = 1;
    fprintf(stderr, "nanocompile: NANOCOMPILE_THREADS='%s' is not an integer in 1..%d; "
            "using %d threads\n", getenv("NANOCOMPILE_THREADS"), NC_POOL_MAX_THREADS,
            (int)fallback);
  }
  return fallback;
}

/* -- lifecycle (ctl held, then dispatch) ---------------------------------- */

static void nc_pool_atfork_prepare(void) {
  if (nc_pool_depth > 0) return; /* forking from inside a task: we hold dispatch already */
  pthread_mutex_lock(&nc_pool_g.ctl);
  pthread_mutex_lock(&nc_pool_g.dispatch);
  nc_pool_fork_locked = 1;
}

static void nc_pool_atfork_parent(void) {
  if (!nc_pool_fork_locked) return;
  nc_pool_fork_locked = 0;
  pthread_mutex_unlock(&nc_pool_g.dispatch);
  pthread_mutex_unlock(&nc_pool_g.ctl);
}

/* The child has only the forking thread: forget the workers, renew the locks. */
static void nc_pool_atfork_child(void) {
  nc_pool_fork_locked = 0;
  pthread_mutex_init(&nc_pool_g.ctl, NULL);
  pthread_mutex_init(&nc_pool_g.dispatch, NULL);
  pthread_mutex_init(&nc_pool_g.lock, NULL);
  pthread_cond_init(&nc_pool_g.wake, NULL);
  pthread_cond_init(&nc_pool_g.done, NULL);
  atomic_store(&nc_pool_g.threads, 0);
  atomic_store(&nc_pool_g.pending, 0);
  atomic_store(&nc_pool_g.sleepers, 0);
  atomic_store(&nc_pool_g.caller_sleeping, 0);
}

static int32_t nc_pool_start_locked(void) {
  if (!nc_pool_g.atfork_registered) {
    nc_pool_g.atfork_registered = 1;
    pthread_atfork(nc_pool_atfork_prepare, nc_pool_atfork_parent, nc_pool_atfork_child);
  }
  int32_t logical = 0;
  const int32_t dflt = nc_pool_default_threads(&logical);
  const int32_t want = nc_pool_g.requested > 0 ? nc_pool_g.requested : dflt;
  nc_pool_g.spin_ns = want <= logical ? NC_POOL_SPIN_NS : 0;
  nc_pool_g.base_ticket = atomic_load(&nc_pool_g.ticket);
  int32_t made = 1;
  while (made < want && pthread_create(&nc_pool_g.tid[made], NULL, nc_pool_worker,
                                       (void *)(intptr_t)made) == 0) {
    nc_pool_name(nc_pool_g.tid[made], made);
    ++made;
    atomic_fetch_add(&nc_pool_g.created, 1);
  }
  atomic_store(&nc_pool_g.threads, made);
  return made;
}

static void nc_pool_stop_locked(void) {
  const int32_t t = atomic_load(&nc_pool_g.threads);
  if (t == 0) return;
  const uint64_t generation = (atomic_load(&nc_pool_g.ticket) >> NC_POOL_CHUNK_BITS) + 1;
  nc_pool_publish(generation << NC_POOL_CHUNK_BITS); /* chunks 0: stop */
  for (int32_t i = 1; i < t; ++i) pthread_join(nc_pool_g.tid[i], NULL);
  atomic_store(&nc_pool_g.threads, 0);
}

/* Running thread count, starting the pool if it is stopped (1 once final). */
static int32_t nc_pool_ensure(void) {
  int32_t t = atomic_load(&nc_pool_g.threads);
  if (t > 0) return t;
  pthread_mutex_lock(&nc_pool_g.ctl);
  if (!atomic_load(&nc_pool_g.final)) {
    pthread_mutex_lock(&nc_pool_g.dispatch);
    t = atomic_load(&nc_pool_g.threads);
    if (t == 0) t = nc_pool_start_locked();
    pthread_mutex_unlock(&nc_pool_g.dispatch);
  }
  pthread_mutex_unlock(&nc_pool_g.ctl);
  return t > 0 ? t : 1;
}

/* -- the parallel loop --------------------------------------------------- */

__attribute__((unused)) static int32_t nc_pool_worker_id(void) { return nc_pool_tid; }

__attribute__((unused)) static int32_t nc_parallel_for(int64_t n, int64_t grain,
                                                        nc_task_fn fn, void *ctx) {
  if (fn == NULL || n < 0) return -1;
  if (n == 0) return 0;
  if (nc_pool_depth > 0 || nc_pool_tid > 0 || atomic_load(&nc_pool_g.final)) {
    const int32_t t = atomic_load(&nc_pool_g.threads);
    const int32_t k = nc_pool_chunks(n, grain, t > 0 ? t : 1);
    for (int32_t i = 0; i < k; ++i) nc_pool_run_chunk(n, k, i, fn, ctx);
    return 0;
  }
  if (nc_pool_chunks(n, grain, NC_POOL_MAX_THREADS) == 1) { /* serial whatever the count */
    nc_pool_run_chunk(n, 1, 0, fn, ctx);
    return 0;
  }
  for (;;) {
    if (nc_pool_chunks(n, grain, nc_pool_ensure()) == 1) { /* 1 thread: no lock needed */
      nc_pool_run_chunk(n, 1, 0, fn, ctx);
      return 0;
    }
    pthread_mutex_lock(&nc_pool_g.dispatch);
    const int32_t t = atomic_load(&nc_pool_g.threads);
    if (t == 0 && !atomic_load(&nc_pool_g.final)) { /* stopped meanwhile: start again */
      pthread_mutex_unlock(&nc_pool_g.dispatch);
      continue;
    }
    const int32_t k = nc_pool_chunks(n, grain, t > 0 ? t : 1);
    if (k > 1) {
      nc_pool_g.fn = fn;
      nc_pool_g.ctx = ctx;
      nc_pool_g.n = n;
      atomic_store_explicit(&nc_pool_g.pending, k - 1, memory_order_relaxed);
      const uint64_t generation = (atomic_load(&nc_pool_g.ticket) >> NC_POOL_CHUNK_BITS) + 1;
      nc_pool_publish((generation << NC_POOL_CHUNK_BITS) | (uint64_t)k);
      nc_pool_run_chunk(n, k, 0, fn, ctx);
      nc_pool_wait_done();
    } else {
      nc_pool_run_chunk(n, 1, 0, fn, ctx);
    }
    pthread_mutex_unlock(&nc_pool_g.dispatch);
    return 0;
  }
}

/* -- control functions (exported; internal code calls the static versions) */

static int32_t nc_pool_set_threads_impl(int32_t n) {
  if (n < 0 || n > NC_POOL_MAX_THREADS || nc_pool_depth > 0 || nc_pool_tid > 0) return -1;
  pthread_mutex_lock(&nc_pool_g.ctl);
  int32_t t = -1;
  if (!atomic_load(&nc_pool_g.final)) {
    pthread_mutex_lock(&nc_pool_g.dispatch);
    nc_pool_g.requested = n;
    nc_pool_stop_locked();
    t = nc_pool_start_locked();
    pthread_mutex_unlock(&nc_pool_g.dispatch);
  }
  pthread_mutex_unlock(&nc_pool_g.ctl);
  return t;
}

static void nc_pool_shutdown_impl(void) {
  if (nc_pool_depth > 0 || nc_pool_tid > 0) return; /* from inside a task: cannot join */
  pthread_mutex_lock(&nc_pool_g.ctl);
  pthread_mutex_lock(&nc_pool_g.dispatch);
  nc_pool_stop_locked();
  pthread_mutex_unlock(&nc_pool_g.dispatch);
  pthread_mutex_unlock(&nc_pool_g.ctl);
}

__attribute__((destructor)) static void nc_pool_fini(void) {
  atomic_store(&nc_pool_g.final, 1);
  nc_pool_shutdown_impl();
}

int32_t nc_pool_init(int32_t threads) {
  if (threads > NC_POOL_MAX_THREADS || nc_pool_depth > 0 || nc_pool_tid > 0) return -1;
  pthread_mutex_lock(&nc_pool_g.ctl);
  int32_t t = atomic_load(&nc_pool_g.threads);
  if (t == 0 && !atomic_load(&nc_pool_g.final)) {
    pthread_mutex_lock(&nc_pool_g.dispatch);
    nc_pool_g.requested = threads > 0 ? threads : 0;
    t = nc_pool_start_locked();
    pthread_mutex_unlock(&nc_pool_g.dispatch);
  }
  pthread_mutex_unlock(&nc_pool_g.ctl);
  return t > 0 ? t : 1;
}

int32_t nc_pool_threads(void) {
  int32_t t = atomic_load(&nc_pool_g.threads);
  if (t > 0) return t;
  pthread_mutex_lock(&nc_pool_g.ctl);
  int32_t logical = 0;
  t = nc_pool_g.requested > 0 ? nc_pool_g.requested : nc_pool_default_threads(&logical);
  pthread_mutex_unlock(&nc_pool_g.ctl);
  return t;
}

int32_t nc_pool_set_threads(int32_t n) { return nc_pool_set_threads_impl(n); }

void nc_pool_shutdown(void) { nc_pool_shutdown_impl(); }
/* ---- end of the thread pool ---- */
