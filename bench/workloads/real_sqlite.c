/* Workload `sqlite`: the sqlite3 shell on a generated in-memory database —
 * inserts of rows with text of varied length, an index build, grouped
 * aggregates, updates that grow strings, deletes and a self-join. The SQL is
 * deterministic and generated inside SQLite (recursive CTEs), so this driver
 * just builds the command and becomes sqlite3 (exec): the measured process
 * is sqlite3 itself, under whichever allocator was preloaded. */
#include "wl_common.h"
#include "wl_exec.h"

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "sqlite: sqlite3 shell on a generated in-memory database (insert, index, aggregate, update)");
  char sqlite[PATH_MAX];
  if (!wl_find_program("sqlite3", sqlite)) wl_unavailable("sqlite3", "apt-get install sqlite3");
  long rows = wl_scaled(&o, 50000L, 500);
  static char sql[4096];
  snprintf(sql, sizeof sql,
           "PRAGMA cache_size=-65536;"
           "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, val REAL, grp INT);"
           "BEGIN;"
           "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<%ld) "
           "INSERT INTO t SELECT x, printf('%%0*d', 8 + (x*7919)%%180, x), (x*2654435761)%%100000/7.0, x%%97 FROM c;"
           "COMMIT;"
           "CREATE INDEX t_name ON t(name);"
           "CREATE INDEX t_grp ON t(grp, val);"
           "SELECT grp, count(*), round(avg(val),3), max(length(name)) FROM t GROUP BY grp ORDER BY 2 DESC, 1 LIMIT 3;"
           "BEGIN;"
           "UPDATE t SET name = name || printf('%%0*d', (id%%50)+1, id) WHERE id%%3=0;"
           "DELETE FROM t WHERE id%%5=0;"
           "COMMIT;"
           "SELECT count(*), sum(length(name)) FROM t;"
           "SELECT count(*) FROM t a JOIN t b ON a.grp=b.grp AND b.id=a.id+97 WHERE a.id%%10=1;"
           "SELECT group_concat(substr(name,1,2),'') IS NOT NULL FROM (SELECT name FROM t ORDER BY name LIMIT 5000);",
           rows);
  fflush(stdout);
  execl(sqlite, "sqlite3", "-batch", ":memory:", sql, (char *)NULL);
  perror("exec sqlite3");
  return 3;
}
