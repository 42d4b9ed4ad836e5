/* Workload `python`: python3 running an allocation-heavy script (dicts,
 * lists, tuples, strings, JSON round trips, a small object graph) with
 * PYTHONMALLOC=malloc, so every Python object goes through the preloaded
 * malloc instead of pymalloc. The script times its own work (work_s=).
 * Prefers the distribution's /usr/bin/python3 so every allocator runs the
 * same interpreter build.
 *
 * Isolated by hand, not with -I: -I (like -E) makes Python ignore every
 * PYTHON* variable, PYTHONMALLOC too, so until 2026-11-24 the row ran on
 * pymalloc and sent the allocator about 2,300 calls a round (0.03% of the
 * run's instructions were the allocator's). Every other PYTHON* variable
 * is removed from the environment instead, PYTHONSAFEPATH (3.11) keeps the
 * working directory off sys.path as -I did, -s leaves out the user's site
 * directory and -S the site module. */
#include "wl_common.h"
#include "wl_exec.h"

static const char script[] =
    "import json, sys, time\n"
    "scale = float(sys.argv[1])\n"
    "rounds = max(1, int(6 * scale))\n"
    "t0 = time.perf_counter()\n"
    "total = 0\n"
    "class Node:\n"
    "    __slots__ = ('key', 'kids', 'tag')\n"
    "    def __init__(self, key):\n"
    "        self.key = key; self.kids = []; self.tag = 'n%d' % key\n"
    "for r in range(rounds):\n"
    "    d = {('k%d' % i): [i, str(i) * (i % 7 + 1), (i, r)] for i in range(20000)}\n"
    "    s = json.dumps(d)\n"
    "    back = json.loads(s)\n"
    "    total += len(back) + len(s) % 1000\n"
    "    words = ' '.join(back.keys()).split()\n"
    "    counts = {}\n"
    "    for w in words:\n"
    "        counts[w[:3]] = counts.get(w[:3], 0) + 1\n"
    "    nodes = [Node(i) for i in range(10000)]\n"
    "    for i, n in enumerate(nodes[1:], 1):\n"
    "        nodes[(i * 7919 + 13) % i].kids.append(n)\n"
    "    total += sum(len(n.kids) for n in nodes) + len(counts)\n"
    "    del d, s, back, words, counts, nodes\n"
    "print('work_s=%.6f' % (time.perf_counter() - t0))\n"
    "print('checksum=%d' % total)\n";

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "python: python3 allocation-heavy script (dicts, strings, JSON) with PYTHONMALLOC=malloc");
  char python[PATH_MAX];
  if (!wl_find_program("/usr/bin/python3", python) && !wl_find_program("python3", python))
    wl_unavailable("python3", "apt-get install python3");
  char scale[32];
  snprintf(scale, sizeof scale, "%g", o.scale);
  extern char **environ;
  for (char **e = environ; *e != NULL;) {
    const char *eq = strchr(*e, '=');
    char name[256];
    if (strncmp(*e, "PYTHON", 6) != 0 || eq == NULL || (size_t)(eq - *e) >= sizeof name) {
      e++;
      continue;
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
    unsetenv(name); /* shifts environ: look at the same slot again */
  }
  setenv("PYTHONMALLOC", "malloc", 1);
  setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
  setenv("PYTHONSAFEPATH", "1", 1);
  fflush(stdout);
  execl(python, "python3", "-s", "-S", "-c", script, scale, (char *)NULL);
  perror("exec python3");
  return 3;
}
