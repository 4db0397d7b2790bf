/* templates/include/ft_exp2.cuh, the very code the kernels include, compiled for the CPU: its
 * 2^x against exp2 in double precision over the softmax's arguments (every 1/2^14 from -126 to
 * 0, and the floats next to each integer and half-integer, where the rounding to n changes),
 * within 3e-6 relative; exactly 0 below -126 and for -inf (the masked scores); NaN stays NaN. The
 * CPU's fmaf and IEEE adds are the GPU's FFMA and FADD (round to nearest even), so the device
 * gives the same bits for normal results. */
#include <float.h>
#include <math.h>

#include "ft_test.h"
#include "templates/include/ft_exp2.cuh"

static double rel_err(float x)
{
    const double want = exp2((double)x);
    return fabs((double)ft_exp2_poly(x) - want) / want;
}

static void test_accuracy(void)
{
    double worst = 0, at = 0;
    long i;
    int k;

    for (i = 0; i <= 126L << 14; i++) {
        const float x = -(float)i / 16384.0f;
        const double e = rel_err(x);
        if (e > worst)
            worst = e, at = x;
    }
    for (k = 0; k < 2 * 126; k++) {
        const float mid = -0.5f * (float)k;
        const float xs[] = {mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY)};
        int j;
        for (j = 0; j < 3; j++) {
            const double e = xs[j] <= 0 && xs[j] >= -126 ? rel_err(xs[j]) : 0;
            if (e > worst)
                worst = e, at = xs[j];
        }
    }
    printf("  worst relative error %.3e at x = %.9g\n", worst, at);
    ASSERT_TRUE(worst < 3e-6);
    /* a slightly positive argument (the row maximum's, rounded) is fine too */
    ASSERT_TRUE(rel_err(1e-6f) < 3e-6);
    ASSERT_TRUE(fabs(ft_exp2_poly(0.0f) - 1.0) < 3e-6);
}

static void test_edges(void)
{
    ASSERT_TRUE(ft_exp2_poly(-INFINITY) == 0.0f);
    ASSERT_TRUE(ft_exp2_poly(-126.5f) == 0.0f);
    ASSERT_TRUE(ft_exp2_poly(-1e30f) == 0.0f);
    ASSERT_TRUE(ft_exp2_poly(-FLT_MAX) == 0.0f);
    ASSERT_TRUE(isnan(ft_exp2_poly(NAN)));
    ASSERT_TRUE(ft_exp2_poly(-125.0f) > 0.0f);
}

FT_TEST_MAIN(FT_CASE(test_accuracy), FT_CASE(test_edges))
