/* Links one layer's library whole (see CMakeLists.txt, <layer>_linkcheck):
 * building it is the check, running it does nothing. */
int main(void) { return 0; }
