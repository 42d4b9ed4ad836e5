/* startup_budget.c — a program that does nothing: under callgrind with
 * libtessera preloaded, what the library's start-up costs (tes_process_init,
 * from its constructor: page size, options, random key). See
 * tests/lib/CMakeLists.txt, lib.startup_budget. */
int main(void) { return 0; }
