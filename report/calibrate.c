/* calibrate's collective table. */
#include "report/calibrate.h"

void px_report_calib_coll_header(const char *coll, int ranks, double busbw_factor, FILE *out) {
  fprintf(out,
          "# %s over %d ranks (MPI), nccl-tests style: busbw = algbw x %.3g\n"
          "#       size    count   type     time_us  algbw_GB/s  busbw_GB/s\n",
          coll, ranks, busbw_factor);
}

void px_report_calib_coll_row(uint64_t bytes, double time_s, double busbw_factor, FILE *out) {
  double algbw = (double)bytes / time_s;
  fprintf(out, "%12llu %8llu  float %11.2f %11.3f %11.3f\n", (unsigned long long)bytes,
          (unsigned long long)(bytes / sizeof(float)), time_s * 1e6, algbw / 1e9, algbw * busbw_factor / 1e9);
}
