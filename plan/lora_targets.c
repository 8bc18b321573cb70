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
  static const char *const extra[] = {"all"};
  static const int extra_bits[] = {PX_LORA_DEFAULT_TARGETS};
  px_status st =
      px_parse_name_bits(s, "target", px_lora_target_names, PX_LORA_TARGET_BITS, extra, extra_bits, 1, bits, err);
  return st || *bits ? st : px_err_set(err, PX_ERR_INPUT, "empty list");
}

char *px_lora_targets_str(int bits, char *buf, size_t cap) {
  return px_fmt_name_bits(bits, px_lora_target_names, PX_LORA_TARGET_BITS, buf, cap);
}
