"""Notifications as NIXL programs use them: send_notif between agents, get_new_notifs (new
messages per sender, once), update_notifs (accumulated in agent.notifs), and
check_remote_xfer_done after a transfer carrying a notification, by prefix and by substring.
Buffers come from nixl._utils.

Written for NIXL 1.4's Python API; only the backend (NET) is chosen here.
"""
import ctypes
import os
import time

import nixl._utils as nixl_utils
from nixl._api import nixl_agent, nixl_agent_config

SIZE = 64 * 1024
TIMEOUT_S = 20


def until(what, cond):
    end = time.monotonic() + TIMEOUT_S
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.001)


def main():
    init = nixl_agent("sender", nixl_agent_config(backends=["NET"]))
    tgt = nixl_agent("receiver", nixl_agent_config(backends=["NET"]))
    src = nixl_utils.malloc_passthru(SIZE)
    dst = nixl_utils.malloc_passthru(SIZE)
    init.register_memory([(src, SIZE, 0, "")], "DRAM")
    tgt.register_memory([(dst, SIZE, 0, "")], "DRAM")
    assert init.add_remote_agent(tgt.get_agent_metadata()) == b"receiver"

    # Plain notifications: each is seen once by get_new_notifs.
    assert tgt.get_new_notifs() == {}
    init.send_notif("receiver", b"hello")
    init.send_notif("receiver", b"world")
    got = {}
    end = time.monotonic() + TIMEOUT_S
    while len(got.get("sender", [])) < 2:
        assert time.monotonic() < end, got
        for k, v in tgt.get_new_notifs().items():
            got.setdefault(k, []).extend(v)
    assert got == {"sender": [b"hello", b"world"]}, got
    assert tgt.get_new_notifs() == {}

    # update_notifs accumulates into agent.notifs.
    init.send_notif("receiver", b"kept")
    until("the kept notification", lambda: tgt.update_notifs().get("sender"))
    assert tgt.notifs["sender"] == [b"kept"]

    # A transfer's notification, matched by prefix, then one matched by substring.
    for tag, lookup, prefix in ((b"req-17:done", b"req-17", True),
                                (b"layer=3;req-18", b"req-18", False)):
        ctypes.memmove(src, os.urandom(SIZE), SIZE)
        nixl_utils.ba_buf(dst, SIZE)
        h = init.initialize_xfer("WRITE", init.get_xfer_descs([(src, SIZE, 0)], "DRAM"),
                                 tgt.get_xfer_descs([(dst, SIZE, 0)], "DRAM"), "receiver",
                                 tag)
        state = init.transfer(h)
        until("the transfer", lambda: state == "DONE" or init.check_xfer_state(h) == "DONE")
        until("the transfer's notification",
              lambda: tgt.check_remote_xfer_done("sender", lookup, tag_is_prefix=prefix))
        nixl_utils.verify_transfer(src, dst, SIZE)
        init.release_xfer_handle(h)
    # Matched notifications are consumed.
    assert not tgt.check_remote_xfer_done("sender", b"req-17")

    init.remove_remote_agent("receiver")
    nixl_utils.free_passthru(src)
    nixl_utils.free_passthru(dst)


if __name__ == "__main__":
    main()
    print("notifications: ok")
