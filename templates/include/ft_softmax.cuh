// ft_softmax.cuh — the online ("safe") softmax and the causal mask, as every family computes
// them (FlashAttention-2 form: a running row maximum m of the raw scores and a running sum l,
// exponentials in base 2 with the softmax scale folded in).
//
// Masking convention (the runtime and the reference rely on it): causal masking is aligned to
// the bottom-right corner, so query row i sees key j iff j <= i + diag with
// diag = seqlen_k - seqlen_q; a row that sees no key gets O = 0 and LSE = +inf.

namespace ft {

// One past the last key that rows [q_first, q_first + q_valid) see: all of them, or (causal)
// up to the diagonal of the last row (diag = seqlen_k - seqlen_q). 0 or less: no row sees a key.
template <bool CAUSAL_MASK>
__device__ __forceinline__ int keys_seen(int q_first, int q_valid, int seqlen_k, int diag)
{
    int end = seqlen_k;
    if (CAUSAL_MASK)
        end = min(end, q_first + q_valid + diag);
    return end;
}

// The base-2 offset subtracted from a row's scaled scores: its maximum times the scale, or 0
// for a row that has seen only masked keys (m = -inf), so that exp2(-inf - offset) stays 0
// instead of becoming NaN.
__device__ __forceinline__ float row_offset(float m, float scale_log2)
{
    return m == NEG_INF ? 0.f : m * scale_log2;
}

// The log-sum-exp of a finished row (natural log, in units of scale·s) from its maximum m and
// its whole sum l; +inf for a row that saw no key.
__device__ __forceinline__ float row_lse(float m, float l, float scale_log2)
{
    return l > 0.f ? (m * scale_log2 + log2f(l)) * 0.69314718055994531f : POS_INF;
}

} // namespace ft
