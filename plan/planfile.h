/* Plan files: a model, a cluster, a size and the parallel choices in one
 * JSON document, so a chosen plan can be saved, shared and run again. */
#ifndef PX_PLAN_PLANFILE_H
#define PX_PLAN_PLANFILE_H

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"

/* Which parts a plan file gave (the rest come from flags or defaults). */
typedef struct {
  bool has_model, has_cluster;
  px_model model;
  px_cluster cluster;
  int64_t gpus;        /* 0 when absent */
  px_parallel par;     /* unset fields stay unset */
} px_planfile;

/* The largest plan file loaded: a model and a cluster file's worth, and
 * 64 KiB for the size and the parallel choices (256 chunk sizes at most). */
#define PX_PLAN_FILE_MAX_BYTES (PX_MODEL_FILE_MAX_BYTES + PX_CLUSTER_FILE_MAX_BYTES + ((size_t)64 << 10))

/* "model" and "cluster" may be a preset name, a path, or an inline object. */
px_status px_planfile_load(const char *path, px_planfile *pf, px_err *err);
/* The same document in memory: a plan file's JSON (NULL when out of memory;
 * the caller deletes it; report/plan.h writes it), and one read from a tree
 * (path names it in messages; a checkpoint's manifest records its plan this way). */
cJSON *px_planfile_to_json(const px_model *m, const px_cluster *c, const px_parallel *p);
px_status px_planfile_from_json(const cJSON *root, const char *path, px_planfile *pf, px_err *err);

#endif
