/* How a decode step's weight rows stream from memory (python -m bench streams).
 *
 * A decode step reads each weight row once: y[r] = sum_k x[k] * w[r][k] over
 * rows of K = 896 int8 values (the model's q/k/v, gate/up and LM-head rows in
 * kernel A's format), x in L1. The rows (n of them, several times the
 * last-level cache) are read by tiles of R rows at once in one of two
 * patterns:
 *   adjacent: the tile's rows are consecutive (rows t*R .. t*R+R-1): the hand
 *             decode tiles of f32 weights and kernel A;
 *   strided:  the tile's rows are n/R apart (rows t + m*n/R): R streams, each
 *             continued by the next tile (the tuner's "strided" knob).
 * Each tile keeps 4 accumulators of 8 lanes per row (AVX2 + FMA), so the work
 * per byte is the same in every variant; "read" only sums the bytes (the
 * bandwidth of a plain sequential read of the same buffer). Every tile variant
 * is first checked to compute every row's result, bit for bit the one-row
 * tile's (exit 1 otherwise). Prints one JSON object per variant: the fastest
 * of the passes, in ms and GB/s. PAGES "huge" maps the rows in 2 MiB pages
 * (MADV_HUGEPAGE before the first touch, as the model's weight files and the
 * tuner's timed copies are), "small" in 4 KiB pages (MADV_NOHUGEPAGE).
 * Usage: streams ROWS PASSES PAGES */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define K 896

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float lane_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* R rows per tile: P places n/P apart, R/P adjacent rows at each */
#define TILE(R, P)                                                                   \
  static void tile_##R##_##P(const int8_t *w, const float *x, float *y, long n) {   \
    const long span = n / (P);                                                       \
    for (long t = 0; t < span; t += (R) / (P)) {                                     \
      __m256 acc[R][4];                                                              \
      long row[R];                                                                   \
      for (int j = 0; j < (R); j++) {                                                \
        row[j] = (j / ((R) / (P))) * span + t + j % ((R) / (P));                     \
        for (int a = 0; a < 4; a++) acc[j][a] = _mm256_setzero_ps();                 \
      }                                                                              \
      for (long k = 0; k < K; k += 32)                                               \
        for (int a = 0; a < 4; a++) {                                                \
          const __m256 xv = _mm256_loadu_ps(x + k + 8 * a);                          \
          for (int j = 0; j < (R); j++) {                                            \
            const __m128i b = _mm_loadl_epi64((const __m128i *)(w + row[j] * K + k + 8 * a)); \
            acc[j][a] = _mm256_fmadd_ps(xv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), \
                                        acc[j][a]);                                  \
          }                                                                          \
        }                                                                            \
      for (int j = 0; j < (R); j++)                                                  \
        y[row[j]] = lane_sum(_mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]),      \
                                           _mm256_add_ps(acc[j][2], acc[j][3])));    \
    }                                                                                \
  }
TILE(1, 1) TILE(2, 1) TILE(4, 1) TILE(16, 1)
TILE(2, 2) TILE(4, 4) TILE(8, 8) TILE(16, 16)

static void read_only(const int8_t *w, const float *x, float *y, long n) {
  __m256i s = _mm256_setzero_si256();
  (void)x;
  for (long i = 0; i < n * K; i += 32)
    s = _mm256_add_epi8(s, _mm256_loadu_si256((const __m256i *)(w + i)));
  y[0] = (float)_mm256_extract_epi32(s, 0);
}

typedef void (*variant_fn)(const int8_t *, const float *, float *, long);

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[3], "huge") != 0 && strcmp(argv[3], "small") != 0)) {
    fprintf(stderr, "usage: %s ROWS PASSES huge|small\n", argv[0]);
    return 2;
  }
  const int huge = strcmp(argv[3], "huge") == 0;
  const long n = atol(argv[1]);
  const int passes = atoi(argv[2]);
  if (n < 16 || n % 16 != 0 || passes < 1) {
    fprintf(stderr, "ROWS: a multiple of 16; PASSES: at least 1\n");
    return 2;
  }
  const size_t bytes = (size_t)n * K;
  const size_t page = (size_t)2 << 20;
  int8_t *w = aligned_alloc(page, (bytes + page - 1) / page * page);
  if (w != NULL) /* before the first touch; a refusal leaves the kernel's default */
    (void)madvise(w, (bytes + page - 1) / page * page, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  float *y = aligned_alloc(64, (size_t)n * sizeof(float));
  float x[K];
  if (w == NULL || y == NULL) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  uint32_t state = 12345u;
  for (size_t i = 0; i < bytes; i++) {
    state = state * 1664525u + 1013904223u;
    w[i] = (int8_t)(state >> 24);
  }
  for (int k = 0; k < K; k++) x[k] = 1.0f / (float)(k + 1);
  const struct { const char *pattern; int rows; variant_fn fn; } v[] = {
      {"read", 0, read_only},      {"adjacent", 1, tile_1_1},  {"adjacent", 2, tile_2_1},
      {"adjacent", 4, tile_4_1},   {"adjacent", 16, tile_16_1}, {"strided", 2, tile_2_2},
      {"strided", 4, tile_4_4},    {"strided", 8, tile_8_8},    {"strided", 16, tile_16_16}};
  const int count = (int)(sizeof v / sizeof v[0]);
  float *want = aligned_alloc(64, (size_t)n * sizeof(float));
  if (want == NULL) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  tile_1_1(w, x, want, n);
  for (int i = 1; i < count; i++) {  /* every tile computes every row, the same bits */
    for (long r = 0; r < n; r++) y[r] = -1.0f;
    v[i].fn(w, x, y, n);
    for (long r = 0; r < n; r++)
      if (y[r] != want[r]) {
        fprintf(stderr, "%s x%d: row %ld differs\n", v[i].pattern, v[i].rows, r);
        return 1;
      }
  }
  double best[16];
  for (int i = 0; i < count; i++) best[i] = 1e30;
  for (int p = 0; p < passes; p++)
    for (int i = 0; i < count; i++) {  /* the variants alternate within each pass */
      const double t = seconds();
      v[i].fn(w, x, y, n);
      const double dt = seconds() - t;
      if (dt < best[i]) best[i] = dt;
    }
  for (int i = 0; i < count; i++)
    printf("{\"pattern\": \"%s\", \"rows\": %d, \"ms\": %.3f, \"gbs\": %.2f}\n", v[i].pattern,
           v[i].rows, best[i] * 1e3, (double)bytes / best[i] / 1e9);
  free(w);
  free(y);
  free(want);
  return 0;
}
