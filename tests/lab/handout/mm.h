/* A mock of the classic CS:APP malloc-lab mm.h (with the team struct). */
#include <stdio.h>

extern int mm_init(void);
extern void *mm_malloc(size_t size);
extern void mm_free(void *ptr);
extern void *mm_realloc(void *ptr, size_t size);

typedef struct {
  char *teamname; /* ID1+ID2 or ID1 */
  char *name1;    /* full name of first member */
  char *id1;      /* login ID of first member */
  char *name2;    /* full name of second member (if any) */
  char *id2;      /* login ID of second member */
} team_t;

extern team_t team;
