/* The network: link resources (per-GPU NVLink and NIC, each direction) and
 * the flows that cross them. A flow first waits its latency, then moves its
 * bytes over one or more resources; flows on a resource share its bandwidth
 * equally, and a flow progresses at the pace of its tightest resource.
 * Rates are recomputed whenever a flow joins or leaves a resource. */
#ifndef PX_SIM_NETWORK_H
#define PX_SIM_NETWORK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "sim/engine.h"

#define PX_FLOW_MAX_RES 4

typedef struct {
  int32_t res[PX_FLOW_MAX_RES];
  double bytes[PX_FLOW_MAX_RES]; /* bytes over each resource */
  double bw[PX_FLOW_MAX_RES];    /* bytes/s the flow gets on it when alone */
  int nres;
  double latency_s;
} px_flow_spec;

typedef struct px_net px_net;

/* The engine receives events of kinds ev_join and ev_done (a = flow id,
 * b = version); the caller hands them back to px_net_on_join / on_done. */
px_net *px_net_new(px_engine *eng, int32_t nres, uint32_t ev_join, uint32_t ev_done, px_err *err);
void px_net_free(px_net *n);
/* Starts a flow now; returns its id (>= 0) or -1 on allocation failure. */
int32_t px_net_start(px_net *n, const px_flow_spec *spec, uint64_t tag);
void px_net_on_join(px_net *n, int32_t id);
/* True when the event finishes the flow (false for stale events); then
 * *tag and *start_ns describe it and the id may be reused. */
bool px_net_on_done(px_net *n, int32_t id, uint64_t version, uint64_t *tag, uint64_t *start_ns);
px_status px_net_status(const px_net *n, px_err *err);
/* Flows started and not yet finished that use resource r (waiting or moving). */
int32_t px_net_claims(const px_net *n, int32_t r);

/* Where an unfinished flow stands, to carry it into another network: the
 * simulator runs a block alone in a network of its own once, and moves its
 * open flows into the shared one when it stops running as one event. */
typedef struct {
  double remaining, rate; /* share of the transfer left at last_ns, and its pace since */
  uint64_t start_ns, last_ns;
  uint64_t due_ns;        /* its pending event: the join (latency over) or, joined, its end */
  bool joined;
} px_flow_state;

void px_net_state(const px_net *n, int32_t id, px_flow_state *out);
/* Starts a flow where px_net_state left it, its times shifted by shift_ns:
 * its pace holds until a flow joins or leaves one of its resources, and its
 * pending event comes when it would have. Returns its id, or -1 on
 * allocation failure. */
int32_t px_net_resume(px_net *n, const px_flow_spec *spec, uint64_t tag, const px_flow_state *st, uint64_t shift_ns);

#endif
