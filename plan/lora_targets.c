/* The linear layers a low-rank adapter may target: names, parsing, printing. */
#include "plan/lora_targets.h"

#include <stdio.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_lora_target_names, PX_LORA_TARGET_BITS, "q", "k", "v", "qkv", "o", "fc1", "gate", "up", "fc2");

const px_lora_linear px_lora_linears[PX_LORA_LINEARS] = {
    {"qkv_w", {PX_LORA_Q, PX_LORA_K, PX_LORA_V, PX_LORA_QKV}},
    {"o_w", {0, 0, 0, PX_LORA_O}},
    {"fc1_w", {PX_LORA_GATE, PX_LORA_UP, 0, PX_LORA_FC1}},
    {"fc2_w", {0, 0, 0, PX_LORA_FC2}},
};

px_status px_lora_targets_parse(const char *s, int *bits, px_err *err) {
  int out = 0;
  for (const char *p = s; *p;) {
    size_t n = strcspn(p, ",");
    int bit = -1;
    if (n == 3 && !strncmp(p, "all", n)) bit = PX_LORA_DEFAULT_TARGETS;
    for (int i = 0; i < PX_LORA_TARGET_BITS && bit < 0; i++)
      if (strlen(px_lora_target_names[i]) == n && !strncmp(p, px_lora_target_names[i], n)) bit = 1 << i;
    if (bit < 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "'%.*s' is not one of qkv, q, k, v, o, fc1, gate, up, fc2, all", (int)n, p);
    out |= bit;
    p += n;
    if (*p == ',') p++;
  }
  if (!out) return px_err_set(err, PX_ERR_INPUT, "empty list");
  *bits = out;
  return PX_OK;
}

char *px_lora_targets_str(int bits, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < PX_LORA_TARGET_BITS && n < cap; i++)
    if (bits & (1 << i)) n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "," : "", px_lora_target_names[i]);
  return buf;
}
