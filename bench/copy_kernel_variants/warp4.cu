/* Variant: one warp per entry, 16-byte words, 4 in flight per lane. */
struct ixl_copy_desc {
    unsigned long long dst, src, len;
};

extern "C" __global__ void __launch_bounds__(256)
ixl_copy_batch(const ixl_copy_desc *__restrict__ tab, unsigned int n)
{
    const unsigned int lane = threadIdx.x & 31;
    const unsigned int wpb = blockDim.x >> 5;
    const unsigned int nw = gridDim.x * wpb;
    for (unsigned int i = blockIdx.x * wpb + (threadIdx.x >> 5); i < n; i += nw) {
        unsigned long long v = 0;
        if (lane < 3)
            v = ((const volatile unsigned long long *)&tab[i])[lane];
        unsigned long long dst = __shfl_sync(0xffffffffu, v, 0);
        unsigned long long src = __shfl_sync(0xffffffffu, v, 1);
        unsigned long long len = __shfl_sync(0xffffffffu, v, 2);
        unsigned long long done = 0;
        if (((dst ^ src) & 15) == 0) {
            unsigned long long head = (16 - (dst & 15)) & 15;
            if (head > len)
                head = len;
            if (lane < head)
                ((char *)dst)[lane] = ((const char *)src)[lane];
            unsigned long long nv = (len - head) >> 4, k = lane;
            uint4 *vd = (uint4 *)(dst + head);
            const uint4 *vs = (const uint4 *)(src + head);
            for (; k + 96 < nv; k += 128) {
                uint4 a = vs[k], b = vs[k + 32], c = vs[k + 64], d = vs[k + 96];
                vd[k] = a;
                vd[k + 32] = b;
                vd[k + 64] = c;
                vd[k + 96] = d;
            }
            for (; k < nv; k += 32)
                vd[k] = vs[k];
            done = head + (nv << 4);
        }
        for (unsigned long long k = done + lane; k < len; k += 32)
            ((char *)dst)[k] = ((const char *)src)[k];
    }
}
