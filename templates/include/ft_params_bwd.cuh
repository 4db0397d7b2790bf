// ft_params_bwd.cuh — the argument block of the backward operation (dQ, dK, dV), shared by its
// three kernels and mirrored field for field by runtime/kernel.h (which static_asserts its
// size). Strides are in elements; Q, O, dO, dQ [batch, seqlen_q, heads_q, d], K, V, dK, dV
// [batch, seqlen_k, heads_kv, d]. (The forward's block is in ft_params.cuh.)

namespace ft {

struct BwdParams {
    const void *q, *k, *v, *o, *dout;
    void *dq, *dk, *dv;
    const float *lse; // the forward's LSE: fp32 [batch, heads_q, seqlen_q], natural log
    float *ws;        // the workspace (its layout: the family's template)
    long long q_batch_stride, q_row_stride, q_head_stride;
    long long k_batch_stride, k_row_stride, k_head_stride;
    long long v_batch_stride, v_row_stride, v_head_stride;
    long long o_batch_stride, o_row_stride, o_head_stride;
    long long dout_batch_stride, dout_row_stride, dout_head_stride;
    long long dq_batch_stride, dq_row_stride, dq_head_stride;
    long long dk_batch_stride, dk_row_stride, dk_head_stride;
    long long dv_batch_stride, dv_row_stride, dv_head_stride;
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
    float scale;      // softmax scale applied to q·k
    float scale_log2; // scale · log2(e)
    int reserved;
};

} // namespace ft
