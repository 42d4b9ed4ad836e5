/* size_class.c — the table behind tes_class_size() (see size_class.h for the
 * geometry and its waste bound). Built from the same constant expression the
 * static assertions check, so table and formula cannot drift apart. */
#include "size_class.h"

#define C4(c) TES_CLASS_SIZE_EXPR(c), TES_CLASS_SIZE_EXPR(c + 1), TES_CLASS_SIZE_EXPR(c + 2), TES_CLASS_SIZE_EXPR(c + 3)

const uint32_t tes_class_sizes[TES_CLASS_COUNT] = {
    C4(0),  C4(4),  C4(8),  C4(12), C4(16), C4(20), C4(24),
    C4(28), C4(32), C4(36), C4(40), C4(44), C4(48), C4(52), C4(56), C4(60),
};
static_assert(sizeof tes_class_sizes / sizeof tes_class_sizes[0] == TES_CLASS_COUNT, "table covers all classes");

/* Indexed by b, 8 <= b <= 16 (tes_class_of_above_256); 0 below. */
#define G(b) TES_CLASS_GROUP_EXPR(b##u)
const uint16_t tes_class_groups[17] = {[8] = G(8),   G(9),  G(10), G(11), G(12),
                                       [13] = G(13), G(14), G(15), G(16)};
