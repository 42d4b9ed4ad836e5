/* secure_exec.c — linked with libtessera-secure: prints whether the process
 * runs in secure-execution mode (AT_SECURE: set-user-ID or set-group-ID)
 * and the option values the library took, then frees a block twice. In
 * secure execution the TESSERA_* variables belong to a less privileged
 * caller and must be ignored: TESSERA_ABORT_ON_ERROR=0 must not keep the
 * process alive past the double free. Run by secure_exec.sh. */
#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  printf("AT_SECURE=%lu abort_on_error=%ld show_stats=%ld\n", getauxval(AT_SECURE),
         tes_option_get(TES_OPTION_ABORT_ON_ERROR), tes_option_get(TES_OPTION_SHOW_STATS));
  char *volatile p = malloc(40);
  free(p);
  free(p);
  printf("still running after a double free\n");
  return 0;
}
