// ft_atomic.cuh — additions into global memory from many blocks, and the counters that order
// them: fp32 reductions (red.global.add; the vector forms of compute capability 9.0), and a
// semaphore of one int per tile with acquire loads and release additions at GPU scope.
// Needs ft_device.cuh.

namespace ft {

__device__ __forceinline__ void red_add(float *addr, float a)
{
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(addr), "f"(a) : "memory");
}

// Two and four adjacent floats: one instruction on 9.0 (8- and 16-byte aligned addresses),
// scalar reductions before it.
__device__ __forceinline__ void red_add2(float *addr, float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
    red_add(addr, a);
    red_add(addr + 1, b);
#endif
}

__device__ __forceinline__ void red_add4(float *addr, float a, float b, float c, float d)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
                 : "memory");
#else
    red_add(addr, a);
    red_add(addr + 1, b);
    red_add(addr + 2, c);
    red_add(addr + 3, d);
#endif
}

__device__ __forceinline__ int load_acquire(const int *addr)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void add_release(int *addr, int v)
{
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(addr), "r"(v) : "memory");
}

// Blocks the thread block until *sem == value (one thread spins, then a barrier). A block may
// only wait for blocks that are resident or done (a lower linear block index), or it deadlocks.
__device__ __forceinline__ void sem_wait(const int *sem, int value)
{
    if (threadIdx.x == 0)
        while (load_acquire(sem) != value)
            asm volatile("nanosleep.u32 64;\n");
    __syncthreads();
}

// Makes every thread's earlier additions visible, then adds 1 to *sem.
__device__ __forceinline__ void sem_release(int *sem)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        add_release(sem, 1);
}

} // namespace ft
