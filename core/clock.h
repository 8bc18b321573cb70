/* Wall-clock seconds for timing what the tools do (not simulated time). */
#ifndef PX_CORE_CLOCK_H
#define PX_CORE_CLOCK_H

/* A monotonic clock in seconds from an arbitrary origin. */
double px_clock_s(void);

#endif
