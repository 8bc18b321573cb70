/* Test tool: the weights of two full checkpoints of the same model (any plans), tensor by tensor in the canonical
 * layout, each read through its own plan (exec/reshard.h). Prints each canonical tensor whose weights differ, with
 * how many of its elements do ("layer0.q.w 4096/4096"), and exits 0; 2 when one cannot be read. Usage:
 * ckptdiff DIR_A DIR_B */
#include <stdio.h>
#include <stdlib.h>

#include "exec/reshard.h"

/* The checkpoint in dir opened for the plan it records. */
static px_status open_own(const char *dir, px_plan *plan, px_reshard **r, px_err *err) {
  px_planfile *pf = calloc(1, sizeof *pf);
  if (!pf) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_status st = px_reshard_recorded(dir, pf, err);
  px_cluster c;
  if (!st) c = pf->cluster, st = px_cluster_set_size(&c, pf->gpus, 0, err);
  if (!st) {
    px_parallel_resolve(&pf->par, &pf->model, &c);
    st = px_plan_compile(plan, &pf->model, &c, &pf->par, err);
  }
  free(pf);
  if (!st && (st = px_reshard_open(dir, plan, 0, 1, r, err))) px_plan_free(plan);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ckptdiff DIR_A DIR_B\n");
    return 2;
  }
  px_err err = {0};
  px_plan pa, pb;
  px_reshard *a = NULL, *b = NULL;
  px_status st = open_own(argv[1], &pa, &a, &err);
  if (!st && (st = open_own(argv[2], &pb, &b, &err))) px_reshard_free(a), px_plan_free(&pa);
  if (st) {
    fprintf(stderr, "ckptdiff: %s\n", err.msg);
    return 2;
  }
  const px_global_params *g = px_reshard_global(a);
  for (int64_t t = 0; t < g->n && !st; t++) {
    uint64_t n = (uint64_t)(g->t[t].rows * g->t[t].cols), differ = 0;
    float *x = malloc(n * sizeof *x + 4), *y = malloc(n * sizeof *y + 4);
    if (!x || !y) st = px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
    if (!st) st = px_reshard_weights(a, g->t[t].offset, n, x, &err);
    if (!st) st = px_reshard_weights(b, g->t[t].offset, n, y, &err);
    for (uint64_t i = 0; !st && i < n; i++) differ += x[i] != y[i];
    if (!st && differ) printf("%s %llu/%llu\n", g->t[t].name, (unsigned long long)differ, (unsigned long long)n);
    free(x), free(y);
  }
  px_reshard_free(a), px_reshard_free(b);
  px_plan_free(&pa), px_plan_free(&pb);
  if (st) fprintf(stderr, "ckptdiff: %s\n", err.msg);
  return st ? 2 : 0;
}
