/* templates/include/ft_sched.cuh, the very code flash_fwd_sm90 includes for balance=2, compiled
 * for the CPU: its order takes every block of every (batch, head) pair exactly once, for every
 * section size from 1 to the pairs (a last section with fewer pairs among them); sections follow
 * each other, and within one the blocks go longest first (k = 0, 1, ... in turn), at each k its
 * pairs in order. The section size fills the L2 budget with K and V, at least one pair, at most
 * all of them. */
#include <stdlib.h>

#include "ft_test.h"
#include "templates/include/ft_sched.cuh"

static void test_order_takes_every_block_once(void)
{
    int heads, m, sect;

    for (heads = 1; heads <= 24; heads++)
        for (m = 1; m <= 17; m++)
            for (sect = 1; sect <= heads; sect++) {
                const int n = heads * m;
                unsigned char *seen = calloc((size_t)n, 1);
                int idx, sec_now = 0, k_now = -1, pair_now = -1;

                ASSERT_TRUE(seen != NULL);
                for (idx = 0; idx < n; idx++) {
                    const int item = ft_sched_item(idx, m, heads, sect);
                    const int pair = item / m, k = item % m, sec = pair / sect;
                    ASSERT_TRUE(item >= 0 && item < n);
                    ASSERT_EQ(seen[item], 0);
                    seen[item] = 1;
                    if (sec != sec_now) { /* the next section, from its longest blocks */
                        ASSERT_EQ(sec, sec_now + 1);
                        ASSERT_EQ(k_now, m - 1);
                        sec_now = sec, k_now = -1;
                    }
                    if (k != k_now) { /* the next length: the section's first pair */
                        ASSERT_EQ(k, k_now + 1);
                        ASSERT_EQ(pair, sec * sect);
                    } else {
                        ASSERT_EQ(pair, pair_now + 1);
                    }
                    k_now = k, pair_now = pair;
                }
                ASSERT_EQ(sec_now, (heads - 1) / sect);
                free(seen);
            }
}

static void test_section_size(void)
{
    ASSERT_EQ(ft_sched_section(16, 1, 16384, 128), 4);  /* 8 MiB of K and V a head in 32 MiB */
    ASSERT_EQ(ft_sched_section(64, 8, 16384, 128), 32); /* 8 query heads share one K/V head's */
    ASSERT_EQ(ft_sched_section(16, 8, 16384, 128), 16); /* at most the pairs */
    ASSERT_EQ(ft_sched_section(256, 1, 1024, 128), 64);
    ASSERT_EQ(ft_sched_section(8, 1, 1 << 20, 256), 1); /* 1 GiB a head: one at least */
    ASSERT_EQ(ft_sched_section(5, 1, 0, 64), 5);        /* no keys */
}

FT_TEST_MAIN(FT_CASE(test_order_takes_every_block_once), FT_CASE(test_section_size))
