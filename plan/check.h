/* The deadlock check of a plan's pipeline sends and receives (plan/check.c). */
#ifndef PX_PLAN_CHECK_H
#define PX_PLAN_CHECK_H

#include "core/status.h"
#include "plan/query.h"

/* Checks that every send has one matching receive and that running every
 * stage's program with blocking, rendezvous sends and receives (each p2p
 * batch posted together, as batch_isend_irecv) finishes. */
px_status px_plan_check_p2p(const px_plan *plan, px_err *err);

#endif
