/* The `tessera` subcommands. Each lives in its own tools/cmd_*.c file and is
 * listed once in the table in tools/tessera.c. A command receives argv with
 * argv[0] set to its own name and returns the process exit status. */
#ifndef TESSERA_TOOLS_COMMANDS_H
#define TESSERA_TOOLS_COMMANDS_H

int cmd_lab(int argc, char **argv);    /* tools/cmd_lab.c   — replay traces on lab policies */
int cmd_run(int argc, char **argv);    /* tools/cmd_run.c   — run a program on libtessera   */
int cmd_bench(int argc, char **argv);  /* tools/cmd_bench.c — allocator comparison suite    */

/* Directory holding the running `tessera` binary (for finding build/ siblings
 * such as libtessera.so and the bench programs). Never NULL; no trailing '/'. */
const char *tessera_self_dir(void);

#endif
