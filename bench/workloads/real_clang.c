/* Workload `clang`: clang-14 compiling (-S -O1, C++20) a C++ translation
 * unit that this driver generates: a small self-contained container
 * library (growable array, binary search tree, sort) and, per module,
 * a record type, a constexpr function that builds, sorts and indexes a
 * container at compile time (constexpr new/delete, C++20), a family of
 * class templates with virtual functions and code that uses them. No
 * system header is included, so the input is the same wherever clang-14
 * runs. The compiler runs in its own process under the preloaded allocator
 * (clang 14 runs cc1 inside the driver: one process); its wall time is
 * work_s, its CPU time and peak RSS replace the runner's figures (the
 * driver's own are not the compiler's).
 *
 * Results are checked, not only the exit status: clang must print nothing
 * on stderr, and each module's tessera_check_N() must appear in the
 * assembly returning the constant that this driver computes the same way
 * (so a compiler that misevaluated a constexpr container, dropped a
 * function or wrote a truncated file fails the run, exit 3). */
#define _GNU_SOURCE
#include "wl_common.h"
#include "wl_exec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Modules at scale 1: about 0.8 s of clang-14 on the system allocator on
 * the 2-core machine, some 1.3 million mallocs (most of the time is the
 * -O1 pipeline's: inlining, instruction combining and selection, whose IR
 * and DAG nodes are malloc'd one by one; the front end's AST comes from
 * large bump-allocated slabs). */
#define CLANG_MODULES 16

static char dir[PATH_MAX] = "";
static char source_path[PATH_MAX + 16], asm_path[PATH_MAX + 16], err_path[PATH_MAX + 16];
static volatile pid_t compiler = -1;

static void remove_files(void) {
  unlink(source_path);
  unlink(asm_path);
  unlink(err_path);
  if (dir[0]) rmdir(dir);
}

/* The runner's timeout or Ctrl-C: stop the compiler, leave nothing behind
 * (unlink and rmdir are async-signal-safe). */
static void on_terminate(int sig) {
  (void)sig;
  if (compiler > 0) kill(compiler, SIGKILL);
  remove_files();
  _exit(130);
}

static void fail(const char *what) {
  fprintf(stderr, "clang: %s\n", what);
  remove_files();
  exit(3);
}

/* The container library every module instantiates. */
static const char prelude[] =
    "using size_t = decltype(sizeof 0);\n"
    "namespace lib {\n"
    "template <class T> constexpr T &&move(T &t) noexcept { return static_cast<T &&>(t); }\n"
    "template <class T> constexpr void swap(T &a, T &b) { T t = move(a); a = move(b); b = move(t); }\n"
    "template <class T> class Vec {\n"
    "  T *data_ = nullptr;\n"
    "  size_t size_ = 0, cap_ = 0;\n"
    "  constexpr void grow() {\n"
    "    size_t cap = cap_ ? 2 * cap_ : 4;\n"
    "    T *grown = new T[cap];\n"
    "    for (size_t i = 0; i < size_; ++i) grown[i] = move(data_[i]);\n"
    "    delete[] data_;\n"
    "    data_ = grown;\n"
    "    cap_ = cap;\n"
    "  }\n"
    "public:\n"
    "  constexpr Vec() = default;\n"
    "  Vec(const Vec &) = delete;\n"
    "  Vec &operator=(const Vec &) = delete;\n"
    "  constexpr ~Vec() { delete[] data_; }\n"
    "  constexpr void push(const T &v) { if (size_ == cap_) grow(); data_[size_++] = v; }\n"
    "  constexpr size_t size() const { return size_; }\n"
    "  constexpr T &operator[](size_t i) { return data_[i]; }\n"
    "  constexpr const T &operator[](size_t i) const { return data_[i]; }\n"
    "  constexpr T *begin() { return data_; }\n"
    "  constexpr T *end() { return data_ + size_; }\n"
    "};\n"
    "template <class T, class Less> constexpr void sort(T *first, T *last, Less less) {\n"
    "  for (T *i = first + 1; i < last; ++i)\n"
    "    for (T *j = i; j > first && less(*j, *(j - 1)); --j) swap(*j, *(j - 1));\n"
    "}\n"
    "template <class K, class V> class Map {\n"
    "  struct Node { K key; V value; Node *left = nullptr, *right = nullptr; };\n"
    "  Node *root_ = nullptr;\n"
    "  constexpr static void destroy(Node *n) { if (n) { destroy(n->left); destroy(n->right); delete n; } }\n"
    "public:\n"
    "  constexpr Map() = default;\n"
    "  Map(const Map &) = delete;\n"
    "  constexpr ~Map() { destroy(root_); }\n"
    "  constexpr void put(const K &key, const V &value) {\n"
    "    Node **at = &root_;\n"
    "    while (*at && (*at)->key != key) at = key < (*at)->key ? &(*at)->left : &(*at)->right;\n"
    "    if (*at) (*at)->value = value;\n"
    "    else *at = new Node{key, value};\n"
    "  }\n"
    "  constexpr V get_or(const K &key, const V &otherwise) const {\n"
    "    for (Node *n = root_; n; n = key < n->key ? n->left : n->right)\n"
    "      if (n->key == key) return n->value;\n"
    "    return otherwise;\n"
    "  }\n"
    "};\n"
    "struct Shape {\n"
    "  virtual ~Shape() = default;\n"
    "  virtual long area() const = 0;\n"
    "  virtual const char *name() const = 0;\n"
    "};\n"
    "}\n";

/* One module; every %1$d is the module's number. */
static const char module[] =
    "namespace mod%1$d {\n"
    "struct Item {\n"
    "  long id = 0, weight = 0, tag = 0;\n"
    "  constexpr bool operator<(const Item &o) const { return weight < o.weight || (weight == o.weight && id < o.id); }\n"
    "};\n"
    "constexpr long build(long seed, long count) {\n"
    "  lib::Vec<Item> items;\n"
    "  for (long k = 0; k < count; ++k) {\n"
    "    seed = (seed * 1103515245 + 12345) & 0x7fffffff;\n"
    "    items.push(Item{k, seed %% 1000, seed >> 16});\n"
    "  }\n"
    "  lib::sort(items.begin(), items.end(), [](const Item &a, const Item &b) { return a < b; });\n"
    "  lib::Map<long, long> last_id;\n"
    "  for (Item &it : items) last_id.put(it.weight %% 37, it.id);\n"
    "  long acc = 0;\n"
    "  for (size_t k = 0; k < items.size(); ++k)\n"
    "    acc = (acc * 31 + items[k].id * (long)(k + 1) + last_id.get_or(items[k].weight %% 37, 0)) %% 1000000007;\n"
    "  return acc + 1;\n"
    "}\n"
    "static_assert(build(%1$d + 1, 8) > 0);\n"
    "template <int Sides> struct Polygon : lib::Shape {\n"
    "  long side;\n"
    "  explicit Polygon(long s) : side(s) {}\n"
    "  long area() const override { return side * side * Sides / 4 + %1$d; }\n"
    "  const char *name() const override { return \"polygon\"; }\n"
    "};\n"
    "template <class Base, int Layer> struct Decorated : Base {\n"
    "  using Base::Base;\n"
    "  long area() const override { return Base::area() * 2 + Layer; }\n"
    "};\n"
    "long total_area(lib::Vec<lib::Shape *> &shapes) {\n"
    "  long sum = 0;\n"
    "  for (lib::Shape *s : shapes) sum += s->area();\n"
    "  return sum;\n"
    "}\n"
    "long fill_and_measure(long n) {\n"
    "  lib::Vec<lib::Shape *> shapes;\n"
    "  for (long k = 0; k < n; ++k) {\n"
    "    shapes.push(new Polygon<3>(k));\n"
    "    shapes.push(new Polygon<4 + %1$d %% 5>(k + 1));\n"
    "    shapes.push(new Decorated<Polygon<6>, 1>(k + 2));\n"
    "    shapes.push(new Decorated<Decorated<Polygon<8 + %1$d %% 3>, 2>, 3>(k + 3));\n"
    "  }\n"
    "  lib::sort(shapes.begin(), shapes.end(), [](lib::Shape *a, lib::Shape *b) { return a->area() < b->area(); });\n"
    "  long area = total_area(shapes);\n"
    "  for (lib::Shape *s : shapes) delete s;\n"
    "  return area;\n"
    "}\n"
    "lib::Vec<Item> *make_items(long n) {\n"
    "  auto *items = new lib::Vec<Item>;\n"
    "  for (long k = 0; k < n; ++k) items->push(Item{k, (k * 7919) %% 1000, k});\n"
    "  lib::sort(items->begin(), items->end(), [](const Item &a, const Item &b) { return a < b; });\n"
    "  return items;\n"
    "}\n"
    "}\n"
    "extern \"C\" long tessera_check_%1$d() { constexpr long v = mod%1$d::build(%1$d + 1, %2$d); return v; }\n"
    "extern \"C\" long tessera_run_%1$d(long n) { return mod%1$d::fill_and_measure(n) + mod%1$d::make_items(n)->size(); }\n";

typedef struct item_s {
  long id, weight, tag;
} item_t;

static int item_less(const item_t *a, const item_t *b) {
  return a->weight < b->weight || (a->weight == b->weight && a->id < b->id);
}

/* mod::build() in C: what tessera_check_N must return. */
static long expected_check(long seed, long count) {
  item_t items[64];
  for (long k = 0; k < count; ++k) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    items[k] = (item_t){k, seed % 1000, seed >> 16};
  }
  for (long i = 1; i < count; ++i)
    for (long j = i; j > 0 && item_less(&items[j], &items[j - 1]); --j) {
      item_t t = items[j];
      items[j] = items[j - 1];
      items[j - 1] = t;
    }
  long last_id[37];
  for (int k = 0; k < 37; k++) last_id[k] = 0;
  for (long k = 0; k < count; ++k) last_id[items[k].weight % 37] = items[k].id;
  long acc = 0;
  for (long k = 0; k < count; ++k)
    acc = (acc * 31 + items[k].id * (k + 1) + last_id[items[k].weight % 37]) % 1000000007;
  return acc + 1;
}

/* How many items module m's check builds at compile time. */
static long check_items(long m) { return 24 + m % 40; }

static void write_unit(FILE *out, long modules) {
  fputs(prelude, out);
  for (long m = 0; m < modules; m++) fprintf(out, module, (int)m, (int)check_items(m));
}

static char *read_file(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return NULL;
  }
  char *text = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (text && got < (size_t)st.st_size) {
    ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (!text || got != (size_t)st.st_size) {
    free(text);
    return NULL;
  }
  text[got] = '\0';
  *len = got;
  return text;
}

/* Every module's tessera_check_N: defined once, returning the expected
 * constant (`movl $V, %eax` before its `ret`). Returns the number of
 * modules that are wrong, naming the first on stderr. */
static long verify_assembly(const char *text, long modules) {
  long wrong = 0;
  for (long m = 0; m < modules; m++) {
    char label[64];
    snprintf(label, sizeof label, "\ntessera_check_%ld:", m);
    const char *at = strstr(text, label);
    const char *end = at ? strstr(at, "\n\tret") : NULL;
    const char *mov = at ? strstr(at, "\n\tmovl\t$") : NULL;
    long want = expected_check(m + 1, check_items(m)), got = -1;
    if (mov && end && mov < end) got = strtol(mov + strlen("\n\tmovl\t$"), NULL, 10);
    if (got != want && wrong++ == 0)
      fprintf(stderr, "clang: tessera_check_%ld %s %ld, expected %ld\n", m,
              at ? "returns" : "is missing from the assembly; looked for", at ? got : 0L, want);
  }
  return wrong;
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"source", NULL};
  wl_options_t o = wl_parse_ex(argc, argv,
                               "clang: clang-14 -S -O1 on a generated C++20 translation unit (templates, constexpr containers, virtual classes)\n"
                               "--mode source: print the translation unit and exit (no compiler needed)",
                               modes, 0);
  long modules = wl_scaled(&o, CLANG_MODULES, 2);
  if (o.mode && !strcmp(o.mode, "source")) {
    write_unit(stdout, modules);
    return fflush(stdout) == 0 ? 0 : 3;
  }
  char clang[PATH_MAX];
  if (!wl_find_program("clang-14", clang) && !wl_find_program("/usr/bin/clang-14", clang))
    wl_unavailable("clang-14", "apt-get install clang-14");

  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/tessera-clang-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    dir[0] = '\0';
    fail("cannot create a temporary directory");
  }
  snprintf(source_path, sizeof source_path, "%s/unit.cpp", dir);
  snprintf(asm_path, sizeof asm_path, "%s/unit.s", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
  signal(SIGTERM, on_terminate);
  signal(SIGINT, on_terminate);

  FILE *src = fopen(source_path, "w");
  if (!src) fail("cannot write the translation unit");
  write_unit(src, modules);
  if (ferror(src) || fclose(src) != 0) fail("cannot write the translation unit");

  int err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err_fd < 0) fail("cannot create the compiler's stderr file");
  fflush(stdout);
  double t0 = wl_now();
  pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    int null_in = open("/dev/null", O_RDONLY);
    if (null_in < 0 || dup2(null_in, STDIN_FILENO) < 0 || dup2(err_fd, STDOUT_FILENO) < 0 ||
        dup2(err_fd, STDERR_FILENO) < 0)
      _exit(126);
    execl(clang, "clang-14", "-x", "c++", "-std=c++20", "-S", "-O1", "-fno-color-diagnostics",
          "-o", asm_path, source_path, (char *)NULL);
    _exit(127);
  }
  compiler = pid;
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0)
    if (errno != EINTR) fail("wait4");
  compiler = -1;
  double work = wl_now() - t0;
  close(err_fd);

  size_t err_len = 0, asm_len = 0;
  char *err = read_file(err_path, &err_len);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || err_len != 0) {
    fprintf(stderr, "clang: %s exited %s %d%s\n%.2000s", clang,
            WIFEXITED(status) ? "with status" : "on signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
            err_len ? "; its output:" : "", err ? err : "");
    fail("the compilation failed");
  }
  free(err);
  char *text = read_file(asm_path, &asm_len);
  if (!text) fail("no assembly written");
  long wrong = verify_assembly(text, modules);
  free(text);
  if (wrong) {
    fprintf(stderr, "clang: %ld of %ld modules wrong\n", wrong, modules);
    fail("the assembly is wrong");
  }
  remove_files();

  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  printf("modules=%ld\n", modules);
  printf("asm_kib=%.1f\n", (double)asm_len / 1024.0);
  printf("override_cpu_s=%.6f\n", cpu);
  printf("override_peak_rss_kib=%ld\n", ru.ru_maxrss);
  wl_report(work, (double)modules);
  return 0;
}
