/* first_malloc_budget.c — what a process's first malloc asks of the kernel
 * (not a timing): the system calls it makes and the pages of its first
 * segment it maps. Run with LIBRARY preloaded; the program runs itself again
 * (a fresh process, so that its malloc(16) is the process's first) as a
 * traced child and counts the child's system calls between two markers
 * around that malloc, then the child checks its segment's header.
 *
 *   first_malloc_budget MAX_SYSCALLS    (LD_PRELOAD=libtessera.so)
 *
 * (2 in the default build: the heap struct's chunk and the segment; the
 * hardened build adds its two guard pages' mprotect.)
 * Fails when the first malloc makes more than MAX_SYSCALLS system calls or
 * any munmap (the first segment was over-mapped and trimmed: three calls
 * where the one at the hint below the heap struct's chunk does), or when an
 * OS page of the new segment's header beyond its first is mapped (its page
 * descriptors, only read by the link of a segment nothing of is in use yet:
 * each read of untouched memory is a fault, for the zero page).
 * docs/PERFORMANCE.md, twenty-sixth session, start26. Skipped (77) when
 * ptrace is not allowed, or when the hint's range was taken (the kernel
 * refused it: the fallback over-maps, as it must). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEGMENT ((uintptr_t)4 << 20) /* TES_SEGMENT_SIZE */
#define MARKER SYS_getppid           /* no allocator path calls it */

static int child(void) {
  syscall(MARKER);
  void *volatile p = malloc(16);
  syscall(MARKER);
  if (p == NULL) return 3;
  /* The segment's OS pages from its second up to 32 KiB: the rest of its
   * header (13 KiB of it in the default build; the hardened build's guard
   * page follows it, its remote-free bitmaps start at 32 KiB); none is
   * mapped yet. */
  uintptr_t seg = (uintptr_t)p & ~(SEGMENT - 1);
  long os_page = sysconf(_SC_PAGESIZE);
  unsigned char present[64];
  size_t pages = (size_t)(32768 / os_page) - 1;
  if (pages > sizeof present) pages = sizeof present;
  if (mincore((void *)(seg + (uintptr_t)os_page), pages * (size_t)os_page, present) != 0) {
    perror("mincore");
    return 3;
  }
  int mapped = 0;
  for (size_t i = 0; i < pages; i++) mapped += present[i] & 1;
  free(p);
  if (mapped != 0) {
    fprintf(stderr, "FAIL: %d of the first segment's %zu OS pages after its first are mapped (its header read)\n",
            mapped, pages);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return child();
  if (argc != 2) {
    fprintf(stderr, "usage: %s MAX_SYSCALLS\n", argv[0]);
    return 2;
  }
  long budget = atol(argv[1]);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(77);
    raise(SIGSTOP);
    execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
    _exit(2);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return 2;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return 77; /* PTRACE_TRACEME refused */
  if (!WIFSTOPPED(status)) return 2;
  if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)) != 0) {
    kill(pid, SIGKILL);
    return 77;
  }
  int markers = 0, calls = 0, munmaps = 0, refused_hint = 0;
  bool entry = true;
  long number = -1;
  for (;;) {
    if (ptrace(PTRACE_SYSCALL, pid, NULL, NULL) != 0) break;
    if (waitpid(pid, &status, 0) != pid) break;
    if (WIFEXITED(status) || WIFSIGNALED(status)) break;
    if (!WIFSTOPPED(status)) continue;
    if (WSTOPSIG(status) != (SIGTRAP | 0x80)) continue; /* exec's SIGTRAP, not a system call */
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0) break;
    if (entry) {
      number = (long)regs.orig_rax;
      if (number == MARKER) markers++;
      else if (markers == 1) {
        calls++;
        if (number == SYS_munmap) munmaps++;
        if (number == SYS_mmap) fprintf(stderr, "  mmap(%#llx, %llu, flags %#llx)", regs.rdi, regs.rsi, regs.r10);
        else fprintf(stderr, "  system call %ld", number);
      }
    } else if (markers == 1 && number != MARKER) {
      long result = (long)regs.rax;
      fprintf(stderr, " = %#lx\n", (unsigned long)result);
      if (number == SYS_mmap && result == -EEXIST) refused_hint = 1;
    }
    entry = !entry;
  }
  if (!WIFEXITED(status)) {
    fprintf(stderr, "child did not exit normally\n");
    return 1;
  }
  int child_status = WEXITSTATUS(status);
  printf("first malloc: %d system calls (budget %ld), %d munmap, hint refused: %s; child status %d\n", calls, budget,
         munmaps, refused_hint ? "yes" : "no", child_status);
  if (child_status == 77 || markers < 2) return 77;
  if (refused_hint) return 77; /* the range below the heap chunk was taken */
  int failed = child_status != 0;
  if (calls > budget) {
    fprintf(stderr, "FAIL: the first malloc made %d system calls, budget %ld\n", calls, budget);
    failed = 1;
  }
  if (munmaps > 0) {
    fprintf(stderr, "FAIL: the first malloc trimmed an over-sized mapping (%d munmap)\n", munmaps);
    failed = 1;
  }
  return failed;
}
