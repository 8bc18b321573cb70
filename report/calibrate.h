/* calibrate's collective table, nccl-tests style: a header for each
 * collective measured, then a row for each message size. Plain numbers in,
 * so that report/ prints it without the executor. */
#ifndef PX_REPORT_CALIBRATE_H
#define PX_REPORT_CALIBRATE_H

#include <stdint.h>
#include <stdio.h>

/* The header of collective coll's curve over `ranks` (busbw = algbw x busbw_factor). */
void px_report_calib_coll_header(const char *coll, int ranks, double busbw_factor, FILE *out);
/* A size's row: bytes, count of floats, time a call, algbw and busbw. */
void px_report_calib_coll_row(uint64_t bytes, double time_s, double busbw_factor, FILE *out);

#endif
