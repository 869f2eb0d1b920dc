# shellcheck shell=bash
# Sourced by bench/posix.sh and bench/posix_ab.sh: the transparent huge page mode during a
# storage run, the same for fio and ixlbench.
#
# A direct I/O reaches the disk as requests of at most max_segments physically contiguous
# pieces (254 on this project's virtio disk, max_sectors_kb 4096). With 4 KiB pages, which a
# process gets back in the order the one before it freed them (often no two contiguous), a
# 16 MiB READ went to the disk as requests of 0.6-1 MiB; with 2 MiB pages, of 4 MiB. Which one a
# run got was a lottery, for fio and ixlbench alike: one build against itself in one
# bench/posix_ab.sh run (direct READ 16M, queue depth 16, 7 rounds) read 1.78 GB/s with 2,865
# KiB requests and 0.77 GB/s with 672 KiB ones, and the rows' ratios to fio swung from 0.68
# to 1.57 from run to run.
#
# THP: always (the default: both tools' buffers get huge pages where the kernel has them), never,
# madvise, or keep (the system's setting, untouched). Needs root to change; restored at exit.
thp_file=/sys/kernel/mm/transparent_hugepage/enabled
thp_old=""

thp_mode() {
    sed -n 's/.*\[\([a-z]*\)\].*/\1/p' "$thp_file" 2>/dev/null
}

thp_set() {
    local want=${THP:-always}
    [ "$want" = keep ] && return 0
    if [ ! -w "$thp_file" ]; then
        echo "note: $thp_file is not writable: transparent huge pages stay $(thp_mode)" >&2
        return 0
    fi
    thp_old=$(thp_mode)
    echo "$want" >"$thp_file" || thp_old=""
}

thp_restore() {
    if [ -n "$thp_old" ]; then
        echo "$thp_old" >"$thp_file"
    fi
    thp_old=""
}
