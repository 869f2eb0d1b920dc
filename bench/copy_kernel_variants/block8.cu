/* Variant of src/device/copy_kernel.cu with 8 loads in flight per thread (not adopted: docs/
 * benchmarks.md, "Real GPU, fifth pass"). ixl_copy_batch: one launch copies a table of (dst,
 * src, len) entries, device memory to device memory (src/device/device.c, docs/device.md). Block b takes entries b, b + grid, ...;
 * its threads move 16-byte words when dst and src share their alignment mod 16, else bytes.
 * The table lives in mapped pinned host memory; each entry is read once per block. */
struct ixl_copy_desc {
    unsigned long long dst, src, len;
};

extern "C" __global__ void __launch_bounds__(256)
ixl_copy_batch(const ixl_copy_desc *__restrict__ tab, unsigned int n)
{
    __shared__ unsigned long long e[3];
    for (unsigned int i = blockIdx.x; i < n; i += gridDim.x) {
        if (threadIdx.x < 3)
            e[threadIdx.x] = ((const volatile unsigned long long *)&tab[i])[threadIdx.x];
        __syncthreads();
        unsigned long long dst = e[0], src = e[1], len = e[2];
        __syncthreads();
        unsigned long long done = 0;
        if (((dst ^ src) & 15) == 0) {
            unsigned long long head = (16 - (dst & 15)) & 15;
            if (head > len)
                head = len;
            if (threadIdx.x < head)
                ((char *)dst)[threadIdx.x] = ((const char *)src)[threadIdx.x];
            unsigned long long nv = (len - head) >> 4, k = threadIdx.x;
            uint4 *vd = (uint4 *)(dst + head);
            const uint4 *vs = (const uint4 *)(src + head);
            const unsigned long long step = blockDim.x;
            for (; k + 7 * step < nv; k += 8 * step) {
                uint4 a = vs[k], b = vs[k + step], c = vs[k + 2 * step], d = vs[k + 3 * step];
                uint4 e = vs[k + 4 * step], f = vs[k + 5 * step], g = vs[k + 6 * step], h = vs[k + 7 * step];
                vd[k] = a;
                vd[k + step] = b;
                vd[k + 2 * step] = c;
                vd[k + 3 * step] = d;
                vd[k + 4 * step] = e;
                vd[k + 5 * step] = f;
                vd[k + 6 * step] = g;
                vd[k + 7 * step] = h;
            }
            for (; k < nv; k += step)
                vd[k] = vs[k];
            done = head + (nv << 4);
        }
        for (unsigned long long k = done + threadIdx.x; k < len; k += blockDim.x)
            ((char *)dst)[k] = ((const char *)src)[k];
    }
}
