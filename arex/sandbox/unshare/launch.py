"""The launcher of one unshare sandbox, run as root on the host: `python3 -I -S launch.py SPEC STATUS_FD`.

Standalone (no arex import): it must start fast and, after pivot_root, cannot import anything.

The process started by the host (the shim) makes a new PID namespace and forks the sandbox's
PID 1. The shim puts that child into the sandbox's cgroups before letting it go on (so everything
it ever starts is counted), reports the child's host pid on STATUS_FD, then waits for it: on
SIGTERM it kills it, which makes the kernel kill every process of the namespace.

The child makes its own mount, network, IPC and UTS namespaces, builds the root filesystem (the
image's rootfs under a private overlay, then read-only; tmpfs areas; /proc, /sys, /dev as Docker
makes them), pivots into it, keeps only the capabilities Docker's sandbox keeps (SETUID, SETGID,
KILL), sets no-new-privileges and execs arex's init with the stdio the host gave the shim (the
command server's stream). A setup failure is written to STATUS_FD; success closes it (CLOEXEC).
"""

import ctypes
import fcntl
import json
import os
import platform
import signal
import socket
import stat
import struct
import sys
import traceback
import warnings  # noqa: F401 - os.execvpe imports it, and after pivot_root nothing can be imported

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (
    0x20000,
    0x4000000,
    0x8000000,
    0x20000000,
    0x40000000,
)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
KEPT_CAPS = (5, 6, 7)  # SETGID, SETUID, KILL: what the serving processes need, as with Docker
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
# Docker's masks: kernel internals a container has no business reading or writing.
PROC_READ_ONLY = ("bus", "fs", "irq", "sys", "sysrq-trigger")
PROC_MASKED = ("kcore", "keys", "timer_list", "sched_debug")
EMPTY_READ_ONLY = ("/proc/acpi", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap")
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}

libc = ctypes.CDLL(None, use_errno=True)


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if isinstance(s, str) else s  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def make_dir(path):
    os.makedirs(path, mode=0o755, exist_ok=True)


def make_file(path):
    if not os.path.lexists(path):
        make_dir(os.path.dirname(path))
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def bind(source, target, read_only, extra=0):
    """A bind mount; read-only ones are remounted so (a bind ignores MS_RDONLY on its first call)."""
    (make_dir if os.path.isdir(source) else make_file)(target)
    mount(source, target, None, MS_BIND)  # not recursive: a submount would not be read-only
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra)


def build_dev(root):
    dev = root + "/dev"
    make_dir(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_STRICTATIME, "size=65536k,mode=755")
    for name, (major, minor) in DEVICES.items():
        os.mknod(f"{dev}/{name}", 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(f"{dev}/{name}", 0o666)  # mknod applies the umask
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    for name in ("pts", "shm", "mqueue"):
        os.mkdir(f"{dev}/{name}")
    mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
    mount("shm", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=65536k")
    mount("mqueue", f"{dev}/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def build_proc_and_sys(root):
    pseudo = MS_NOSUID | MS_NODEV | MS_NOEXEC
    make_dir(root + "/proc")
    mount("proc", root + "/proc", "proc", pseudo)  # this PID namespace's processes only
    make_dir(root + "/sys")
    mount("sysfs", root + "/sys", "sysfs", pseudo | MS_RDONLY)  # this network namespace's devices: lo
    for name in PROC_READ_ONLY:
        if os.path.exists(f"{root}/proc/{name}"):
            bind(f"{root}/proc/{name}", f"{root}/proc/{name}", True, pseudo)
    for name in PROC_MASKED:
        if os.path.exists(f"{root}/proc/{name}"):
            mount(root + "/dev/null", f"{root}/proc/{name}", None, MS_BIND)
    for path in EMPTY_READ_ONLY:
        if os.path.isdir(root + path):
            mount("tmpfs", root + path, "tmpfs", MS_RDONLY)


def build_root(spec):
    """The sandbox's filesystem at <staging>/root: the rootfs under a private overlay (its upper
    layer only holds mount points), then every mount Docker's sandbox has."""
    staging = spec["staging"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host
    mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=700")
    for name in ("upper", "work", "root"):
        os.mkdir(f"{staging}/{name}")
    root = staging + "/root"
    layers = f"lowerdir={spec['rootfs']},upperdir={staging}/upper,workdir={staging}/work"
    mount("overlay", root, "overlay", 0, layers)
    build_dev(root)
    build_proc_and_sys(root)
    for target, options in spec["tmpfs"]:
        make_dir(root + target)
        mount("tmpfs", root + target, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for source, target, read_only in spec["binds"]:
        bind(source, root + target, read_only, MS_NOSUID | MS_NODEV)
    mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    return root


def loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh14x", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh14x", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


def enter(root):
    os.chdir(root)
    check(libc.syscall(SYS_PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "unmount the host's root")  # the old root, stacked under the new one
    os.chdir("/")


def drop_privileges():
    """Capabilities as Docker's sandbox has them: bounding, permitted and effective sets hold only
    SETUID, SETGID and KILL; nothing inheritable or ambient; no-new-privileges."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap not in KEPT_CAPS:
            check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    kept = sum(1 << cap for cap in KEPT_CAPS)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = struct.pack("6I", kept, kept, 0, 0, 0, 0)  # effective, permitted, inheritable (x2 words)
    check(libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no-new-privileges")


# Seccomp, as far as Docker's default profile matters here: no new namespaces (a user namespace
# would hand the agent root-like capabilities over its own mounts and the kernel's wider surface),
# no kernel keyring (keyrings are per uid, not per sandbox: a channel between sandboxes), clone3
# answered ENOSYS (its flags cannot be inspected; glibc then falls back to clone).
AUDIT_ARCHES = {
    # arch: [(AUDIT_ARCH, {clone, unshare, setns, clone3, keyctl, add_key, request_key})]
    "x86_64": [(0xC000003E, (56, 272, 308, 435, 250, 248, 249)), (0x40000003, (120, 310, 346, 435, 288, 286, 287))],
    "aarch64": [(0xC00000B7, (220, 97, 268, 435, 219, 217, 218))],
}
NEW_NAMESPACES = 0x7E020080  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET,TIME}
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38


def seccomp_program():
    """The filter as (code, jump-if-true label, jump-if-false label, k); labels are resolved below."""
    prog = [(LD_ABS, None, None, 4)]  # seccomp_data.arch
    for i, (audit_arch, (clone, unshare, setns, clone3, *keyring)) in enumerate(AUDIT_ARCHES[platform.machine()]):
        prog += [("label", f"arch{i}"), (JEQ, None, f"arch{i + 1}", audit_arch), (LD_ABS, None, None, 0)]
        if audit_arch == 0xC000003E:
            prog.append((JGE, "eperm", None, 0x40000000))  # x32 calls: not inspected, so refused
        prog += [(JEQ, "enosys", None, clone3), (JEQ, "flags", None, clone), (JEQ, "flags", None, unshare)]
        prog += [(JEQ, "eperm", None, nr) for nr in (setns, *keyring)]
        prog.append((RET, None, None, ALLOW))
    prog += [("label", f"arch{len(AUDIT_ARCHES[platform.machine()])}"), (RET, None, None, EPERM)]
    prog += [("label", "flags"), (LD_ABS, None, None, 16), (JSET, "eperm", None, NEW_NAMESPACES)]
    prog += [(RET, None, None, ALLOW), ("label", "eperm"), (RET, None, None, EPERM)]
    prog += [("label", "enosys"), (RET, None, None, ENOSYS)]
    return prog


def install_seccomp():
    prog = seccomp_program()
    labels, code = {}, []
    for item in prog:
        if item[0] == "label":
            labels[item[1]] = len(code)
        else:
            code.append(item)
    jump = lambda label, at: 0 if label is None else labels[label] - at - 1  # noqa: E731
    raw = b"".join(struct.pack("HBBI", op, jump(jt, at), jump(jf, at), k) for at, (op, jt, jf, k) in enumerate(code))
    filters = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HxxxxxxQ", len(code), ctypes.addressof(filters))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0), "seccomp")


def sandbox_main(spec, go_fd, status_fd):
    """PID 1 of the new namespace: wait until the shim has put us in the cgroups, build, exec init."""
    if os.read(go_fd, 2) != b"go":
        os._exit(1)  # the shim failed and reported it
    os.close(go_fd)
    try:
        check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        hostname = spec["hostname"].encode()
        check(libc.sethostname(hostname, len(hostname)), "sethostname")
        loopback_up()
        enter(build_root(spec))
        drop_privileges()
        install_seccomp()  # last: no-new-privileges lets it be installed without CAP_SYS_ADMIN
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # ignored by Python; init starts with the defaults
            signal.signal(sig, signal.SIG_DFL)
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException:
        os.write(status_fd, ("error " + traceback.format_exc(limit=3).replace("\n", " | ") + "\n").encode())
        os._exit(1)


def shim_main(spec, status_fd):
    check(libc.unshare(CLONE_NEWPID), "unshare a PID namespace")
    go_read, go_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(go_write)
        sandbox_main(spec, go_read, status_fd)
    os.close(go_read)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))  # our child: never a reused pid
    try:
        for procs in spec["cgroup_procs"]:
            with open(procs, "w") as f:
                f.write(str(child))
    except OSError as exc:
        os.write(status_fd, f"error cannot put the sandbox into its cgroup {procs}: {exc}\n".encode())
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        return 1
    os.write(status_fd, f"pid {child}\n".encode())
    os.write(go_write, b"go")
    for fd in (go_write, status_fd):
        os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)  # the server's stream is the sandbox's alone
    for fd in (0, 1):
        os.dup2(null, fd)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            return os.waitstatus_to_exitcode(status) & 0xFF
        except ChildProcessError:
            return 0


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        spec_ = json.load(f)
    status = int(sys.argv[2])
    os.set_inheritable(status, False)  # the child's exec closes it: EOF on success
    sys.exit(shim_main(spec_, status))
