"""An S3 server for Python tests: the Python twin of tests/s3/s3_server.h.

    with S3Server("bkt") as s:        # skips (pytest) when node or s3rver is missing
        s.endpoint                    # "http://127.0.0.1:<port>"

s3rver (tests/s3/setup.sh installs it into $IXL_S3RVER_DIR or ~/.cache/ixl/s3rver) on
127.0.0.1, port 0 (the kernel picks), a temporary data directory; or the command line in
IXL_S3_SERVER, given " --port 0 --address 127.0.0.1 --directory DIR --bucket BUCKET", which must
print "listening on 127.0.0.1:PORT". Stopped (SIGTERM, then SIGKILL) on exit.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time


def find():
    """(argv prefix, None) or (None, why)."""
    cmd = os.environ.get("IXL_S3_SERVER")
    if cmd:
        return shlex.split(cmd), None
    if shutil.which("node") is None:
        return None, "node not found (install Debian nodejs and npm, then sh tests/s3/setup.sh)"
    base = os.environ.get("IXL_S3RVER_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ixl", "s3rver")
    js = os.path.join(base, "node_modules", "s3rver", "bin", "s3rver.js")
    if not os.path.exists(js):
        return None, f"s3rver not installed at {js} (run sh tests/s3/setup.sh)"
    return ["node", js], None


class S3Server:
    def __init__(self, bucket):
        self.bucket = bucket
        self.proc = None
        self.dir = None
        self.endpoint = None

    def __enter__(self):
        argv, why = find()
        if argv is None:
            import pytest
            pytest.skip(why)
        self.dir = tempfile.mkdtemp(prefix="ixl-s3-")
        data = os.path.join(self.dir, "data")
        os.mkdir(data)
        log_path = os.path.join(self.dir, "server.log")
        if os.environ.get("IXL_S3_SERVER"):
            argv = argv + ["--port", "0", "--address", "127.0.0.1", "--directory", data,
                           "--bucket", self.bucket]
        else:
            argv = argv + ["--silent", "-d", data, "-a", "127.0.0.1", "-p", "0",
                           "--configure-bucket", self.bucket]
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(log_path, "rb") as f:
                m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", f.read())
            if m:
                self.endpoint = f"http://127.0.0.1:{int(m.group(1))}"
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        with open(log_path, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        self.__exit__(None, None, None)
        raise RuntimeError(f"the S3 server did not start: {tail}")

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False
