/* cxx_plugin_host.c — a C program that loads a C++ library at run time, as
 * python loads a C++ extension module: cxx_plugin_host MODULE local|global
 * [--expect-tessera]. libstdc++ comes with the module, after the allocator
 * (preloaded). The module's checks are in cxx_plugin.cpp; the exit status
 * is its count of failed checks. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[2], "local") != 0 && strcmp(argv[2], "global") != 0)) {
    fprintf(stderr, "usage: %s MODULE local|global [--expect-tessera]\n", argv[0]);
    return 2;
  }
  if (argc > 3 && strcmp(argv[3], "--expect-tessera") == 0 && dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "expected libtessera to serve malloc (preloaded)\n");
    return 100;
  }
  void *module = dlopen(argv[1], RTLD_NOW | (strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL));
  if (module == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  int (*run)(void) = (int (*)(void))dlsym(module, "cxx_plugin_run");
  if (run == NULL) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 2;
  }
  int failures = run();
  if (failures != 0) {
    fprintf(stderr, "cxx_plugin (%s): %d check(s) failed\n", argv[2], failures);
    return failures > 99 ? 99 : failures;
  }
  printf("cxx_plugin (%s): all checks passed\n", argv[2]);
  return 0;
}
