/* Test fixtures for tests/cli/startup.sh: libpx_gone.so, a library that is
 * not where the loader looks at run time, and libpx_needs_gone.so, a module
 * that needs it (so loading the module fails on a missing library). */
int px_gone(void);
#ifdef PX_NEEDS_GONE
int px_needs_gone(void) { return px_gone(); }
#else
int px_gone(void) { return 1; }
#endif
