/* Names of element types. */
#include "core/dtype.h"

const char *const px_dtype_names[PX_DTYPE_COUNT] = {"fp32", "tf32", "bf16", "fp16", "fp8", "u8"};
_Static_assert(sizeof px_dtype_names / sizeof px_dtype_names[0] == PX_DTYPE_COUNT, "dtype names");
