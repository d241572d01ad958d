"""A runtime never outlives the evalhub process that started it, however that process ends.

A runtime runs in a process group of its own (:func:`runs.executors.live.drivers.common.start_process_group`)
so that it is killed as a whole, helpers included. That group survives evalhub itself: a worker
or a ``nightly --execute`` killed with SIGKILL (or by the kernel's OOM killer) runs no cleanup, and
its codex, opencode or ACP agent would keep running, and keep spending, with nobody to stop it.
``PR_SET_PDEATHSIG`` cannot help: it fires when the *thread* that started the child exits, and the
harness starts runtimes from threads (a restart, the case driver's interrupt).

So the runtime is started by this small program, which holds the read end of a pipe whose write
end only the evalhub process holds. A process's descriptors close when it ends, however it ends,
so the pipe reads end-of-file exactly when evalhub is gone: then the lifeline kills the runtime's
whole group. Otherwise it waits for the runtime and exits as the runtime did (the same status, the
same signal), so a driver sees what it would see without it. The lifeline stays outside the
runtime's group (the runtime leads a group of its own, whose id it reports on a second pipe): a
driver that kills the group leaves the lifeline to reap the runtime at once.

Run as a script, with nothing imported beyond the standard library (it starts with every runtime)::

    python -I -S lifeline.py FD PID_FD COMMAND [ARG ...]

``FD`` is the inherited read end of the pipe, ``PID_FD`` the write end of the one on which the
runtime's pid (its group's id) is written as a line; ``COMMAND`` is a path (the caller looks it up). The
runtime gets the environment the lifeline was given, byte for byte (read back from
``/proc/self/environ``: Python itself may add ``LC_CTYPE`` to its own at start), its working
folder and its standard streams.
"""

from __future__ import annotations

import os
import select
import signal
import sys

#: Signals a lifeline passes on to its runtime (someone stopping the lifeline means the runtime).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(argv: list[str]) -> int:
    """Start ``argv[3:]`` with ``argv[1]`` as the lifeline descriptor and ``argv[2]`` as the one its
    pid is written to; never returns normally when the runtime is killed (the lifeline re-raises
    its signal). Returns 2 on a usage error and 127 when the command cannot be started (what a
    shell returns)."""
    if len(argv) < 4 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: lifeline.py FD PID_FD COMMAND [ARG ...]", file=sys.stderr)
        return 2
    lifeline, reply = int(argv[1]), int(argv[2])
    command = argv[3:]
    with open("/proc/self/environ", "rb") as given:
        environment = dict(item.split(b"=", 1) for item in given.read().split(b"\0") if b"=" in item)
    child = os.fork()
    if child == 0:
        os.close(lifeline)
        os.close(reply)
        os.setpgid(0, 0)
        try:
            os.execve(command[0], command, environment)
        except OSError as exc:
            os.write(2, f"cannot start {command[0]}: {exc}\n".encode())
        os._exit(127)
    try:
        os.setpgid(child, child)  # both sides set it, so that it is set before either goes on
    except OSError:  # the child already did, or already exec'd (it did so first)
        pass
    os.write(reply, f"{child}\n".encode())
    os.close(reply)
    for number in FORWARDED:
        signal.signal(number, lambda received, _frame: _forward(child, received))
    # The runtime owns the standard streams: its reader sees their end when it exits, not when this does.
    quiet = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(quiet, stream)
    exited = os.pidfd_open(child)
    while True:
        try:
            ready, _, _ = select.select([lifeline, exited] if lifeline >= 0 else [exited], [], [])
        except InterruptedError:  # a forwarded signal
            continue
        if lifeline in ready:  # end-of-file: the process that started the runtime is gone
            try:
                os.killpg(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(lifeline)
            lifeline = -1
        if exited in ready:
            _, status = os.waitpid(child, 0)
            return _exit_like(status)


def _forward(child: int, number: int) -> None:
    try:
        os.kill(child, number)
    except ProcessLookupError:
        pass


def _exit_like(status: int) -> int:
    """End as the runtime ended: its exit code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # neither can be handled, so neither reset
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number  # a signal whose default is to go on (the runtime's was not)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
