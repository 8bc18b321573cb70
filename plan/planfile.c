/* Plan files: read, and their JSON (report/plan.c writes them). */
#include "plan/planfile.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"

static px_status planfile_part(const px_json_ctx *pc, const cJSON *root, const char *key, bool *has, px_model *m,
                               px_cluster *c, px_err *err) {
  const char *path = pc->file;
  const cJSON *v = px_json_get(pc, root, key);
  if (!v) return PX_OK;
  px_status st;
  char where[4200];
  snprintf(where, sizeof where, "%s: field '%s'", path, key);
  if (cJSON_IsString(v))
    st = m ? px_model_load(v->valuestring, m, err) : px_cluster_load(v->valuestring, c, err);
  else if (cJSON_IsObject(v))
    st = m ? px_model_from_json(v, where, m, err) : px_cluster_from_json(v, where, c, err);
  else
    return px_err_set(err, PX_ERR_INPUT, "%s: expected a preset name or an object", where);
  if (st) return cJSON_IsString(v) ? px_err_prefix(err, "%s", where) : st;
  *has = true;
  return PX_OK;
}

px_status px_planfile_from_json(const cJSON *root, const char *path, px_planfile *pf, px_err *err) {
  memset(pf, 0, sizeof *pf);
  px_parallel_unset(&pf->par);
  if (!cJSON_IsObject(root)) return px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object at the top level", path);
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {path, "", &keys};
  const cJSON *par = NULL;
  px_status st;
  if (!(st = planfile_part(&c, root, "model", &pf->has_model, &pf->model, NULL, err)) &&
      !(st = planfile_part(&c, root, "cluster", &pf->has_cluster, NULL, &pf->cluster, err)) &&
      !(st = px_json_int(&c, root, "gpus", false, 1, 1 << 24, &pf->gpus, err)) &&
      !(st = px_json_obj(&c, root, "parallel", false, &par, err)) && par)
    st = px_parallel_from_json(par, path, &pf->par, err);
  if (!st) st = px_json_refuse_unknown(&c, root, NULL, 0, err);
  return st;
}

px_status px_planfile_load(const char *path, px_planfile *pf, px_err *err) {
  memset(pf, 0, sizeof *pf);
  px_parallel_unset(&pf->par);
  cJSON *root = NULL;
  px_status st = px_json_load_max(path, PX_PLAN_FILE_MAX_BYTES, "a plan file", &root, err);
  if (st) return st;
  st = px_planfile_from_json(root, path, pf, err);
  cJSON_Delete(root);
  return st;
}

cJSON *px_planfile_to_json(const px_model *m, const px_cluster *c, const px_parallel *p) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON *parts[3] = {px_model_to_json(m), px_cluster_to_json(c), px_parallel_to_json(p)};
  bool ok = parts[0] && cJSON_AddItemToObject(root, "model", parts[0]);
  ok = parts[1] && cJSON_AddItemToObject(root, "cluster", parts[1]) && ok;
  ok = px_json_add_num(root, "gpus", (double)c->gpus) && ok;
  ok = parts[2] && cJSON_AddItemToObject(root, "parallel", parts[2]) && ok;
  if (ok) return root;
  for (int i = 0; i < 3; i++)
    if (parts[i] && !parts[i]->next && !parts[i]->prev) cJSON_Delete(parts[i]); /* not attached */
  cJSON_Delete(root);
  return NULL;
}
