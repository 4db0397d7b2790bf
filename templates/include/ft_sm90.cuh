// ft_sm90.cuh — PTX of compute capability 9.0 (sm_90a) that the warp-specialised families use:
// mbarriers, TMA tensor loads, named barriers, wgmma fences and waits. The wgmma instructions
// themselves depend on the tile shape and are generated per variant (generator/family.c).
// Needs ft_device.cuh.

// FT_DESC64 (0 unless the source defines it): how smem_desc below builds a descriptor; see there.
#ifndef FT_DESC64
#define FT_DESC64 0
#endif

namespace ft {

// A CUtensorMap as the kernel sees it: 128 opaque bytes, passed as a __grid_constant__.
struct __align__(128) TensorMap {
    u64 opaque[16];
};

__device__ __forceinline__ void mbar_init(u32 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity)
{
    u32 done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// One box of a rank-4 tensor map (element, row, head, batch) into shared memory.
__device__ __forceinline__ void tma_load(u32 dst, const TensorMap *map, int c0, int c1, int c2, int c3, u32 bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

// One box of a rank-4 tensor map (element, row, head, batch) from shared memory into global
// memory: elements past the map's extents are not written. Its own bulk group (bulk_commit).
__device__ __forceinline__ void tma_store(const TensorMap *map, u32 src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"((u64)map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
                 : "memory");
}

// Closes the thread's bulk operations issued since the last commit into one bulk group.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until at most N of the thread's latest bulk groups still read their sources (the older
// ones' buffers may be written again), not for their writes to global memory.
template <int N> __device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Waits until every bulk group of the thread is complete, its writes done.
__device__ __forceinline__ void bulk_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void st_shared4(u32 addr, int a, int b, int c, int d)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// Four 8x8 matrices of 16-bit elements from the warp's registers into shared memory: register i
// of lane l holds row l/4, columns 2·(l%4) and +1 of matrix i (an mma accumulator's layout, packed),
// and lane l gives the address of row l%8 of matrix l/8 (16 bytes, 16-byte aligned).
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}

// The same four matrices stored transposed: lane l gives the address of row l%8 of matrix l/8 of
// the transposes (16 bytes: column l%8 of matrix l/8 as the registers hold it).
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

__device__ __forceinline__ int ld_shared(u32 addr)
{
    int v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

// Orders this thread's generic-proxy writes to shared memory before the async proxy's reads of
// it (a wgmma operand, a bulk copy's source) that a barrier after it lets start.
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void named_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address
// >> 4 in bits 0–13, leading byte offset >> 4 in 16–29, stride byte offset >> 4 in 32–45, base
// offset 0 (every swizzle pattern starts on a 1024-byte boundary), swizzle mode in 62–63 from
// SPAN, the bytes of a swizzled row: 1 = 128 B, 2 = 64 B, 3 = 32 B. tile: a 16-byte aligned
// shared address; off: a byte offset from it, a multiple of 16. Shared addresses are below 2^18
// (228 KB), so start fits its 14 bits and the low word is (tile >> 4) + (off >> 4) + the LBO
// field with no carry between them: with the tile's address in a uniform register, one add a
// wgmma operand (the offset and both fields are compile-time constants), the high word a
// constant. ptxas makes that a ULEA.HI of the tile's address and a UMOV of the high word for
// each operand of each wgmma. With FT_DESC64 the descriptor is a 64-bit base per tile and
// layout plus off >> 4, the same bits (the low word stays below 2^30, so nothing carries into
// the high one), and ptxas adds the offset with one UIADD3.64: 11–31 fewer instructions a trip
// of every sm_90a default's main loop (bf16, nvcc 13.0; FlashAttention-4's loops are built
// that way), the same registers, no spills (tests/sass_macros.sh). Timed on an H100 against the
// old form (bench/results/h100-2026-12-06-macros/): the forward's defaults 0.988–1.028 per
// group, the backward's 0.980–1.007, inside the noise of those runs. Off: the 64-bit bases
// cost registers elsewhere in the space: of the 396 d = 128 bf16 backward variants, 325
// compile without spills as it is and 258 with it (every s_ahead = 1 and most bm = 80 ones lost).
template <int SPAN> __device__ __forceinline__ u64 smem_desc(u32 tile, u32 off, u32 lbo, u32 sbo)
{
    constexpr u64 MODE = SPAN == 128 ? 1ull : SPAN == 64 ? 2ull : 3ull;
#if FT_DESC64
    const u64 base = (u64)(((tile & 0x3FFFF) >> 4) + ((lbo >> 4) << 16)) | ((u64)(sbo >> 4) << 32) | (MODE << 62);
    return base + (u64)(off >> 4);
#else
    return (u64)(((tile & 0x3FFFF) >> 4) + (off >> 4) + ((lbo >> 4) << 16)) | ((u64)(sbo >> 4) << 32) | (MODE << 62);
#endif
}

// Keeps the compiler from moving accumulator reads or writes across wgmma fences and waits.
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(r[i])::"memory");
}

template <int N> __device__ __forceinline__ void fence_regs(u32 (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(r[i])::"memory");
}

} // namespace ft
