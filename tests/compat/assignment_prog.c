/* assignment_prog.c — a test program written the way the first-fit /
 * best-fit assignment's programs are, and built the way they are
 * (`gcc -DFF -Icompat assignment_prog.c build/libmymalloc.a`, likewise -DBF):
 * MALLOC/FREE macros chosen by -DFF / -DBF, an array of equal blocks with
 * spacers, content checks, and the two data segment functions. It must
 * compile without a change and pass; exit status 0 when every check holds.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "my_malloc.h"

#define NUM_ITEMS 1000
#define NUM_ITERS 20
#define ALLOC_SIZE 128

#ifdef FF
#define MALLOC(sz) ff_malloc(sz)
#define FREE(p)    ff_free(p)
#endif
#ifdef BF
#define MALLOC(sz) bf_malloc(sz)
#define FREE(p)    bf_free(p)
#endif

int main(int argc, char *argv[])
{
  int i, j;
  int errors = 0;
  int *array[NUM_ITEMS];
  int *spacing_array[NUM_ITEMS];
  unsigned long data_segment_size;
  unsigned long data_segment_free_space;

  for (i=0; i < NUM_ITEMS; i++) {
    array[i] = (int *)MALLOC(ALLOC_SIZE);
    spacing_array[i] = (int *)MALLOC(ALLOC_SIZE);
    spacing_array[i][0] = -i;
  } //for i

  for (i=0; i < NUM_ITEMS; i++) {
    FREE(array[i]);
  } //for i

  for (i=0; i < NUM_ITERS; i++) {
    for (j=0; j < 100; j++) {
      array[j] = (int *)MALLOC(ALLOC_SIZE);
      array[j][0] = j;
    } //for j

    for (j=100; j < NUM_ITEMS; j++) {
      array[j] = (int *)MALLOC(ALLOC_SIZE);
      array[j][0] = j;
      if (array[j-100][0] != j-100) errors++;
      FREE(array[j-100]);
    } //for j

    for (j=NUM_ITEMS-100; j < NUM_ITEMS; j++) {
      if (array[j][0] != j) errors++;
      FREE(array[j]);
    } //for j
  } //for i

  data_segment_size = get_data_segment_size();
  data_segment_free_space = get_data_segment_free_space_size();
  printf("data_segment_size = %lu, data_segment_free_space = %lu\n", data_segment_size, data_segment_free_space);
  printf("Fragmentation  = %f\n", (float)data_segment_free_space/(float)data_segment_size);

  for (i=0; i < NUM_ITEMS; i++) {
    if (spacing_array[i][0] != -i) errors++;
    FREE(spacing_array[i]);
  }
  /* Equal blocks reuse the holes: the segment holds the 2 x NUM_ITEMS blocks
   * of the first loop and little more. */
  if (data_segment_size == 0 || data_segment_size > 2 * NUM_ITEMS * (ALLOC_SIZE + 64)) errors++;
  if (data_segment_free_space > data_segment_size) errors++;
  if (errors) printf("%d errors\n", errors);
  (void)argc; (void)argv;
  return errors ? 1 : 0;
}
