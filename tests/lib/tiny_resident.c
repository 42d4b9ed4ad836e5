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
 * is read (static buffer, no stdio until the end).
 *
 * The kernel merges the .bss mapping with an anonymous mapping placed right
 * after it (another small mmap that fits the gap there: 1 run in 100 or
 * so), and smaps then counts that mapping's pages as .bss (16-24 KiB read
 * where the library had 8). In that case the library's own pages, up to the
 * end of its last PT_LOAD's memory image, are counted one by one from
 * /proc/self/pagemap: present and mapped by this process alone, which is
 * what Rss counts of a private anonymous mapping (the zero page is neither). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char smaps[1 << 20];

/* The end of libtessera's memory image (its .bss included), page-rounded. */
static int image_end_of(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libtessera") == NULL) return 0;
  uintptr_t end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      uintptr_t e = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz;
      if (e > end) end = e;
    }
  long page = sysconf(_SC_PAGESIZE);
  *(uintptr_t *)data = (end + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
  return 1;
}

/* KiB of [start, end) present and mapped by this process alone, or -1. */
static long resident_exclusive_kib(uintptr_t start, uintptr_t end) {
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return -1;
  long page = sysconf(_SC_PAGESIZE), kib = 0;
  for (uintptr_t v = start; v < end; v += (uintptr_t)page) {
    uint64_t entry;
    if (pread(fd, &entry, sizeof entry, (off_t)(v / (uintptr_t)page * sizeof entry)) != (ssize_t)sizeof entry) {
      close(fd);
      return -1;
    }
    if ((entry >> 63 & 1) && (entry >> 56 & 1)) kib += page / 1024;
  }
  close(fd);
  return kib;
}

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
  unsigned long lib_end = 0, bss_start = 0, bss_end = 0;
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
        bss_start = start;
        bss_end = end;
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
  uintptr_t image_end = 0;
  dl_iterate_phdr(image_end_of, &image_end);
  if (bss_start != 0 && image_end > bss_start && bss_end > image_end) {
    long own = resident_exclusive_kib(bss_start, image_end);
    if (own < 0) {
      fprintf(stderr, "SKIP: the .bss mapping is merged with a neighbour and /proc/self/pagemap is unreadable\n");
      return 77;
    }
    printf("the .bss mapping runs %lu KiB past the library's image (merged with a neighbour): %ld KiB of "
           "it read as resident, %ld KiB of the library's own pages\n",
           (unsigned long)(bss_end - image_end) / 1024, bss_kib, own);
    bss_kib = own;
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
