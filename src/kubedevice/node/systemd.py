"""Readiness for systemd (``Type=notify``): the host service tells systemd when its plugins are served.

``Before=kubelet.service`` orders only the start of the two jobs: with ``Type=exec`` systemd
starts the kubelet as soon as our process runs, and a Python daemon still importing can lose
the race against the kubelet re-admitting its pods after a reboot (kubernetes #128043, the pods
fail with ``UnexpectedAdmissionError``). With ``Type=notify`` the kubelet's start waits for
``READY=1``, sent once every plugin's socket is served and kubelet.sock is watched, so the
kubelet's socket is seen the moment it appears and registration takes milliseconds.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


def notify_ready() -> bool:
    """Send ``READY=1`` to ``$NOTIFY_SOCKET`` (sd_notify(3)); False when not run by systemd."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    target = "\0" + address[1:] if address.startswith("@") else address  # "@": the abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(b"READY=1", target)
    except OSError as err:
        log.warning("could not tell systemd we are ready (NOTIFY_SOCKET=%s): %s", address, err)
        return False
    log.info("told systemd we are ready")
    return True
