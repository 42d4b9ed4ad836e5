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

/* Exit status of a command whose work is done, once standard output is
 * checked: status, or 2 after a message when status is 0 and what was
 * printed (a table, a listing, --help) did not all reach standard output
 * (a full disk, a closed pipe). For commands that exit early (--help). */
int tessera_stdout_status(int status);

#endif
