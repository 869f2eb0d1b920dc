#!/bin/sh
# POSIX on real block devices (root only): a 64 MiB loop volume registered as BLK in path and fd
# mode, buffered and O_DIRECT (test_posix root-blk), and ENOSPC on an 8 MiB ext4 mounted from a
# loop device (test_posix root-enospc). Loop devices, the mount and the temp directory are
# removed on every exit.
#
# Usage: test_posix_root.sh TEST_POSIX_BINARY
# Exit 0 passed, 1 failed, 77 skipped (not root, no loop devices). Under CI=true, as root, a
# loop device or mount that cannot be set up is a failure, and so is a missing tool the project
# installs (e2fsprogs, util-linux).
set -u
bin=$1

skip() {
    echo "SKIP: $1" >&2
    exit 77
}
fail() {
    echo "FAIL: $1" >&2
    exit 1
}
# A skip for something the project installs or, as root, should be able to set up.
skip_ci() {
    if [ "${CI:-}" = true ]; then
        fail "$1 (CI=true)"
    fi
    skip "$1"
}

[ "$(id -u)" = 0 ] || skip "test_posix_root needs root (loop devices, mount)"
for c in losetup mkfs.ext4 mount umount truncate timeout; do
    command -v "$c" >/dev/null 2>&1 ||
        skip_ci "$c not found (apt-get install util-linux e2fsprogs mount coreutils)"
done

tmp=$(mktemp -d /tmp/ixl_posix_root.XXXXXX) || fail "mktemp -d"
vol=""
fsdev=""
mounted=""
cleanup() {
    if [ -n "$mounted" ]; then
        umount "$tmp/mnt" || umount -l "$tmp/mnt" || echo "warning: cannot unmount $tmp/mnt" >&2
    fi
    [ -z "$fsdev" ] || losetup -d "$fsdev" || echo "warning: losetup -d $fsdev failed" >&2
    [ -z "$vol" ] || losetup -d "$vol" || echo "warning: losetup -d $vol failed" >&2
    # Never rm -r through a mount that is still there.
    if ! grep -q " $tmp/mnt " /proc/mounts 2>/dev/null; then
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# The volume: 64 MiB of a sparse file behind a loop device.
truncate -s 64M "$tmp/vol.img" || fail "truncate $tmp/vol.img"
if ! vol=$(losetup -f --show "$tmp/vol.img" 2>"$tmp/err"); then
    vol=""
    skip_ci "no loop device: losetup -f --show: $(cat "$tmp/err")"
fi
echo "volume: $vol" >&2
timeout -k 5 50 "$bin" root-blk "$vol" || fail "test_posix root-blk $vol (exit $?)"

# The full file system: 8 MiB of ext4, written past its free space.
truncate -s 8M "$tmp/fs.img" || fail "truncate $tmp/fs.img"
mkfs.ext4 -q -F "$tmp/fs.img" 2>"$tmp/err" || fail "mkfs.ext4: $(cat "$tmp/err")"
if ! fsdev=$(losetup -f --show "$tmp/fs.img" 2>"$tmp/err"); then
    fsdev=""
    skip_ci "no loop device for the file system: $(cat "$tmp/err")"
fi
mkdir "$tmp/mnt" || fail "mkdir $tmp/mnt"
if ! mount -t ext4 "$fsdev" "$tmp/mnt" 2>"$tmp/err"; then
    skip_ci "cannot mount ext4 from $fsdev: $(cat "$tmp/err")"
fi
mounted=1
echo "file system: $fsdev on $tmp/mnt ($(df -k "$tmp/mnt" | awk 'NR == 2 { print $4 }') KiB free)" >&2
timeout -k 5 50 "$bin" root-enospc "$tmp/mnt" || fail "test_posix root-enospc $tmp/mnt (exit $?)"
echo "test_posix_root: all passed" >&2
exit 0
