/* tiny_resident.c — what a small program keeps resident of libtessera
 * itself (not a timing): run with LIBRARY preloaded, it makes a handful of
 * small allocations, then reads its own /proc/self/smaps and adds up the Rss
 * of the library's mappings: its file pages (the loader reads the first
 * segment, the kernel maps the text 64 KiB around a fault, relocations and
 * writes dirty the data) and its zero-initialised variables, the anonymous
 * mapping that follows the file's last one (.bss). The small variables
 * there lay between large arrays that a process touches one page of, if any
 * (the segment map, the empty slice table, the segment cache, the report
 * scratch, the large-block rings), so a tiny program dirtied six pages of
 * .bss; the arrays are now linked after them (.lbss, src/internal.h,
 * TES_BIG_BSS) and it dirties three: the small variables' two and one of the
 * segment map (docs/PERFORMANCE.md, twenty-fourth session, lean24).
 *
 *   tiny_resident MAX_BSS_KIB MAX_TOTAL_KIB    (LD_PRELOAD=libtessera.so)
 *
 * Fails when the .bss mapping or the whole library is over its budget, or
 * when no library named libtessera is mapped. Rss does not count pages that
 * were only read (the kernel's zero page). Nothing allocates while the file
 * is read (static buffer, no stdio until the end). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char smaps[1 << 20];

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MAX_BSS_KIB MAX_TOTAL_KIB\n", argv[0]);
    return 2;
  }
  long max_bss = atol(argv[1]), max_total = atol(argv[2]);
  void *volatile blocks[8];
  for (int i = 0; i < 8; i++) blocks[i] = malloc((size_t)16 << (i % 4)); /* 16-128 bytes */
  int fd = open("/proc/self/smaps", O_RDONLY);
  if (fd < 0) {
    perror("/proc/self/smaps");
    return 77;
  }
  size_t len = 0;
  ssize_t got;
  while (len < sizeof smaps - 1 && (got = read(fd, smaps + len, sizeof smaps - 1 - len)) > 0) len += (size_t)got;
  close(fd);
  smaps[len] = '\0';
  for (int i = 0; i < 8; i++) free(blocks[i]);

  long file_kib = 0, bss_kib = 0;
  int mappings = 0, current = 0; /* current: 1 a file mapping of the library, 2 its .bss */
  unsigned long lib_end = 0;
  for (char *line = strtok(smaps, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    unsigned long start, end, inode;
    char perms[8], dev[16];
    int name_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*x %15s %lu %n", &start, &end, perms, dev, &inode, &name_at) >= 5 &&
        strchr(line, ':') != NULL && name_at > 0) {
      const char *name = line + name_at;
      if (strstr(name, "libtessera") != NULL) {
        current = 1;
        mappings++;
        lib_end = end;
      } else if (inode == 0 && *name == '\0' && start == lib_end && lib_end != 0) {
        current = 2;
        lib_end = 0;
      } else {
        current = 0;
      }
      continue;
    }
    long kib;
    if (current != 0 && sscanf(line, "Rss: %ld kB", &kib) == 1) {
      if (current == 1) file_kib += kib;
      else bss_kib += kib;
    }
  }
  printf("libtessera resident after 8 small mallocs: %ld KiB of its file (%d mappings), %ld KiB of .bss "
         "(budgets: .bss %ld, all %ld)\n",
         file_kib, mappings, bss_kib, max_bss, max_total);
  int status = 0;
  if (mappings == 0) {
    fprintf(stderr, "FAIL: no libtessera mapping (run with LD_PRELOAD=libtessera.so)\n");
    status = 1;
  }
  if (bss_kib > max_bss) {
    fprintf(stderr, "FAIL: %ld KiB of libtessera's .bss resident, budget %ld\n", bss_kib, max_bss);
    status = 1;
  }
  if (file_kib + bss_kib > max_total) {
    fprintf(stderr, "FAIL: %ld KiB of libtessera resident, budget %ld\n", file_kib + bss_kib, max_total);
    status = 1;
  }
  return status;
}
