"""PID 1 of every sandbox (root): reaps orphans and keeps the command server running.

The server is a forked child holding the container's attached stdin/stdout, which only the host
can reach. If it dies (the kernel's OOM killer is the only thing in the sandbox that can kill a
root process), a GONE line tells the host to fail the requests in flight, and a new server takes
over the same stream.
"""

import os
import runpy
import sys
import time

GONE = b'{"id": "arex-server-gone"}\n'
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.py")
for name in ("PWD", "OLDPWD"):
    os.environ.pop(name, None)


def start():
    pid = os.fork()
    if pid == 0:
        try:
            sys.argv = [SERVER, *sys.argv[1:]]
            runpy.run_path(SERVER, run_name="__main__")
        finally:
            os._exit(0)
    return pid


server = start()
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        time.sleep(1)
        continue
    if pid == server:
        os.write(1, GONE)
        # Killed: start another. Ended on its own: the host closed the stream, nobody is listening.
        server = start() if os.WIFSIGNALED(status) else None
