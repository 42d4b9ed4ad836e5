/* replay_main.c — a main() for a libFuzzer harness built without libFuzzer:
 * runs LLVMFuzzerTestOneInput once on each file named on the command line.
 * Lets the sanitizer trees (gcc, ASan/UBSan or TSan) replay the committed
 * fuzz corpora. Exit 0 when every input ran (the harness aborts on a
 * finding), 1 when a file cannot be read. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      perror(argv[i]);
      return 1;
    }
    static uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
  }
  printf("replayed %d inputs\n", argc - 1);
  return 0;
}
