// Does racecheck model mbarrier arrive (release) / try_wait (acquire) as synchronisation?
// mode 0: thread 0 stores, arrives; warp 1 waits on the mbarrier, loads.  mode 1: same with __syncthreads.
#include <cstdio>
__global__ void k(int *out, int mode)
{
    __shared__ __align__(8) unsigned long long bar;
    __shared__ int x;
    unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    __syncthreads();
    if (mode == 0) {
        if (threadIdx.x == 0) {
            x = 42;
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
        } else if (threadIdx.x >= 32) {
            unsigned done = 0;
            while (!done)
                asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p;}"
                             : "=r"(done) : "r"(b) : "memory");
            out[threadIdx.x] = x;
        }
    } else {
        if (threadIdx.x == 0)
            x = 42;
        __syncthreads();
        if (threadIdx.x >= 32)
            out[threadIdx.x] = x;
    }
}
int main(int argc, char **argv)
{
    int mode = argc > 1 ? atoi(argv[1]) : 0, *d, h[64];
    cudaMalloc(&d, sizeof h);
    k<<<1, 64>>>(d, mode);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("mode %d: out[40] = %d (%s)\n", mode, h[40], cudaGetErrorString(cudaGetLastError()));
    return 0;
}
