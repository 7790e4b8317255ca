/* Runs the programs @vec (vectorized) and @ref (scalar) of the test's module on
   the same special values and compares every output bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 40
#define ROWS 5

int32_t nc_run_vec(const int64_t *syms, void *const *io, char *arena, const int64_t *temps);
int32_t nc_run_ref(const int64_t *syms, void *const *io, char *arena, const int64_t *temps);

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

int main(void) {
  /* NaNs (quiet, signalling, payloads, both signs), infinities, signed zeros,
     subnormals; x and y never hold a NaN in the same lane (two NaNs meeting in
     an add leave the payload open) */
  static const uint32_t special[] = {0x7FC00000u, 0xFFC00001u, 0x7FA00005u, 0x7F800000u,
                                     0xFF800000u, 0x00000000u, 0x80000000u, 0x00000001u,
                                     0x807FFFFFu, 0x7F7FFFFFu};
  float x[N], y[N], vec[ROWS * N], ref[ROWS * N];
  for (int i = 0; i < N; ++i) {
    x[i] = i < 10 ? from_bits(special[i]) : (float)(i - 20) * 0.37f;
    y[i] = (i >= 20 && i < 30) ? from_bits(special[i - 20]) : (float)(13 - i) * 0.61f;
  }
  y[11] = x[11];  /* a tie */
  int64_t syms[1] = {0};
  void *io_vec[] = {x, y, vec};
  void *io_ref[] = {x, y, ref};
  if (nc_run_vec(syms, io_vec, NULL, NULL) != 0 || nc_run_ref(syms, io_ref, NULL, NULL) != 0) {
    printf("a program failed\n");
    return 1;
  }
  int differ = 0;
  for (int i = 0; i < ROWS * N; ++i) {
    uint32_t a, b;
    memcpy(&a, &vec[i], sizeof a);
    memcpy(&b, &ref[i], sizeof b);
    if (a != b) {
      printf("row %d lane %d: vector 0x%08x, scalar 0x%08x\n", i / N, i % N, a, b);
      ++differ;
    }
  }
  printf(differ ? "%d floats differ\n" : "bitwise equal: %d floats\n",
         differ ? differ : ROWS * N);
  return differ != 0;
}
