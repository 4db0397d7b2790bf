// ft_params.cuh — the argument blocks of the operations, one struct per operation, mirrored
// field for field by runtime/kernel.h (which static_asserts their sizes), and where a forward
// call's sequences lie (Seq). Strides are in elements; Q, O [batch, seqlen_q, heads_q, d],
// K, V [batch, seqlen_k, heads_kv, d].

namespace ft {

// The forward operation: O = softmax(scale·Q·Kᵀ)·V and the LSE per row.
struct FwdParams {
    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;       // optional: fp32 [batch, heads_q, seqlen_q], natural log
    long long q_batch_stride, q_row_stride, q_head_stride;
    long long k_batch_stride, k_row_stride, k_head_stride;
    long long v_batch_stride, v_row_stride, v_head_stride;
    long long o_batch_stride, o_row_stride, o_head_stride;
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
    float scale;      // softmax scale applied to q·k
    float scale_log2; // scale · log2(e)
    int reserved;
    // The launch plan's workspace: the split-key family's partial results (flash_decode_sm80), the
    // block counter of flash_fwd_sm90's longest-first order (balance=2); NULL where unused:
    float *ws;        // the workspace of the launch plan (its layout: the family's template)
    long long ws_bytes; // its size: what the plan may use (the host's; kernels do not read it)
    int splits;       // runs of keys per row block (1: no partial results)
    int reserved2;
    // A KV cache (the split-key families read these; NULL: dense K and V of seqlen_k keys):
    const int *seqused_k;   // [batch]: sequence b's keys are its first seqused_k[b]
    const int *block_table; // [batch][block_table_stride]: K and V are pools of pages of page_size
                            // rows, *_batch_stride between pages; key j of sequence b is row
                            // j % page_size of page block_table[b·block_table_stride + j / page_size]
    int page_size;          // a multiple of 16
    int block_table_stride;
    // Variable-length batches ([batch + 1] offsets; NULL: each sequence in its batch slot):
    const int *cu_seqlens_q; // sequence b's queries: rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1
    const int *cu_seqlens_k; // its keys likewise (not with block_table)
    int total_q, total_k;    // the packed tensors' rows where cu_seqlens_* are given (0: not known;
                             // the TMA kernels take such calls only with them)
};

// One sequence of the batch: its queries and keys, and where they lie. A variable-length batch
// (cu_seqlens_q, cu_seqlens_k) packs the sequences' rows one after another ([total, heads, d], the
// batch stride unused, the LSE [heads_q, total_q]); otherwise each sequence has its batch slot
// of seqlen_q queries and seqlen_k keys. seqused_k, a KV cache's lengths, may use fewer keys.
// (Shared by the forward families that read such batches.)
struct Seq {
    int sq, sk; // queries, keys
    int q0, k0; // the first query's and key's row in a variable-length batch (else 0)
    __device__ __forceinline__ long long q_offset(const FwdParams &p, int b) const
    {
        return p.cu_seqlens_q ? (long long)q0 * p.q_row_stride : b * p.q_batch_stride;
    }
    __device__ __forceinline__ long long o_offset(const FwdParams &p, int b) const
    {
        return p.cu_seqlens_q ? (long long)q0 * p.o_row_stride : b * p.o_batch_stride;
    }
    __device__ __forceinline__ long long k_offset(const FwdParams &p, int b, long long batch_stride,
                                                  long long row_stride) const
    {
        return p.cu_seqlens_k ? (long long)k0 * row_stride : b * batch_stride;
    }
    __device__ __forceinline__ long long lse_index(const FwdParams &p, int b, int head, int i) const
    {
        return p.cu_seqlens_q ? (long long)head * (p.total_q > 0 ? p.total_q : p.cu_seqlens_q[p.batch]) + q0 + i
                              : ((long long)b * p.heads_q + head) * p.seqlen_q + i;
    }
};

__device__ __forceinline__ Seq sequence(const FwdParams &p, int b)
{
    Seq s;
    s.q0 = p.cu_seqlens_q ? p.cu_seqlens_q[b] : 0;
    s.sq = p.cu_seqlens_q ? max(0, min(p.seqlen_q, p.cu_seqlens_q[b + 1] - s.q0)) : p.seqlen_q;
    s.k0 = p.cu_seqlens_k ? p.cu_seqlens_k[b] : 0;
    s.sk = p.cu_seqlens_k ? max(0, min(p.seqlen_k, p.cu_seqlens_k[b + 1] - s.k0)) : p.seqlen_k;
    if (p.seqused_k)
        s.sk = max(0, min(s.sk, p.seqused_k[b]));
    return s;
}

} // namespace ft
