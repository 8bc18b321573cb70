/* The discrete-event engine: one clock in integer nanoseconds and one
 * binary heap of events keyed by (time, sequence number), so the same input
 * gives the same output bit for bit. */
#ifndef PX_SIM_ENGINE_H
#define PX_SIM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

typedef struct {
  uint64_t t_ns;
  uint64_t seq;
  uint32_t kind;
  uint32_t a;
  uint64_t b;
} px_event;

typedef struct {
  px_event *heap;
  uint64_t n, cap;
  uint64_t next_seq;
  uint64_t now_ns;
  uint64_t processed;
} px_engine;

px_status px_engine_init(px_engine *e, uint64_t cap, px_err *err);
void px_engine_deinit(px_engine *e);
/* Schedules an event at t_ns (not before now). */
px_status px_engine_push(px_engine *e, uint64_t t_ns, uint32_t kind, uint32_t a, uint64_t b, px_err *err);
/* Pops the earliest event and advances the clock; false when empty. */
bool px_engine_pop(px_engine *e, px_event *out);

/* Seconds to nanoseconds, rounded up so that nothing takes zero time by accident. */
static inline uint64_t px_ns(double s) { return s <= 0 ? 0 : (uint64_t)(s * 1e9 + 0.999999); }

#endif
