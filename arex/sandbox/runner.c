/* arex-run: runs one command inside a sandbox as the agent's user, and reports what it did.
 *
 * The command server (root, with only CAP_SETUID, CAP_SETGID and CAP_KILL) starts one runner per
 * command. The runner stays root, so the command cannot signal, ptrace or open it, and:
 *   - drops the command to the agent's uid/gid (no supplementary groups) after setting hard limits;
 *   - is a child subreaper: every process the command starts, even after setsid or a double
 *     fork, is reparented to it, so the tree is found by parent links, not by anything the
 *     command controls (environment, process group, session);
 *   - reaps every process of the tree with wait4 and sums their CPU time; evidence (exit status,
 *     signal, CPU, peak memory) comes from the kernel through a process the command cannot reach;
 *   - enforces the wall clock for the whole tree and kills it on timeout or on SIGTERM (the server
 *     sends one when the output floods).
 * With -R / -W it reads or writes one file as the agent's user instead of running a command, so the
 * root server never opens a path the agent controls (a symlink would make it a confused deputy).
 *
 * The result is one line on the descriptor given by -r:
 *   exit=N signal=N cpu_us=N maxrss_kb=N timed_out=0|1 killed=0|1 procs=N
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
    uid_t uid;
    gid_t gid;
    const char *dir, *read_path, *write_path;
    double wall;
    long cpu, fsize, stack, memory, read_cap;
    int mode, result_fd, kill_tree, sweep;
};

struct tally {
    long long cpu_us;
    long maxrss_kb;
    int procs;
};

static void die(const char *what) {
    fprintf(stderr, "arex-run: %s: %s\n", what, strerror(errno));
    _exit(126);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void account(struct tally *t, const struct rusage *ru) {
    t->cpu_us += (long long)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
    t->cpu_us += (long long)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
    if (ru->ru_maxrss > t->maxrss_kb) t->maxrss_kb = ru->ru_maxrss;
    t->procs++;
}

/* Parent pid of `pid` from /proc/<pid>/stat (0 if it is gone). The command's name may hold spaces
 * and parentheses, so the fields are read after the last ')'. */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end = strrchr(buf, ')');
    int ppid = 0;
    if (!end || sscanf(end + 1, " %*c %d", &ppid) != 1) return 0;
    return ppid;
}

/* Real uid of `pid` (-1 if it is gone). */
static long uid_of(pid_t pid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", pid);
    return stat(path, &st) == 0 ? (long)st.st_uid : -1;
}

/* Every process below `root` (by parent links), or every process of `uid` when uid >= 0. */
static int collect(pid_t root, long uid, pid_t *out, int cap) {
    static pid_t pids[65536], parents[65536];
    int n = 0, found = 0;
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    for (struct dirent *e; (e = readdir(proc)) && n < 65536;) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 1 || pid == getpid()) continue;
        pids[n] = pid;
        parents[n++] = parent_of(pid);
    }
    closedir(proc);
    if (uid >= 0) {
        for (int i = 0; i < n && found < cap; i++)
            if (uid_of(pids[i]) == uid) out[found++] = pids[i];
        return found;
    }
    out[found++] = root;
    for (int head = 0; head < found; head++)  /* breadth-first over parent links */
        for (int i = 0; i < n && found < cap; i++)
            if (parents[i] == out[head]) out[found++] = pids[i];
    return found - 1 > 0 ? (memmove(out, out + 1, (found - 1) * sizeof *out), found - 1) : 0;
}

/* Kill the tree (or every process of a uid) until none is left, reaping what comes back to us. */
static void kill_all(pid_t root, long uid, struct tally *t) {
    static pid_t victims[65536];
    for (int pass = 0; pass < 200; pass++) {
        int n = collect(root, uid, victims, 65536);
        for (int i = 0; i < n; i++) kill(victims[i], SIGKILL);
        struct rusage ru;
        int status;
        while (wait4(-1, &status, WNOHANG, &ru) > 0) account(t, &ru);
        if (n == 0) return;
        usleep(2000);
    }
}

static void set_limit(int resource, long soft, long hard) {
    struct rlimit rl = {(rlim_t)soft, (rlim_t)hard};
    if (setrlimit(resource, &rl) != 0) die("setrlimit");
}

/* In the child: limits while still root (lowering is always allowed), then the agent's identity. */
static void become_agent(const struct opts *o) {
    setsid();
    if (o->cpu > 0) set_limit(RLIMIT_CPU, o->cpu, o->cpu + 1);
    if (o->fsize > 0) set_limit(RLIMIT_FSIZE, o->fsize, o->fsize);
    if (o->stack > 0) set_limit(RLIMIT_STACK, o->stack, o->stack);
    if (o->memory > 0) set_limit(RLIMIT_AS, o->memory, o->memory);
    set_limit(RLIMIT_CORE, 0, 0);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {  /* under memory pressure the command dies before the serving processes */
        if (write(fd, "1000", 4) < 0) { /* best effort */ }
        close(fd);
    }
    if (setgroups(0, NULL) != 0) die("setgroups");
    if (setgid(o->gid) != 0) die("setgid");
    if (setuid(o->uid) != 0) die("setuid");
    if (getuid() != o->uid || geteuid() != o->uid || setuid(0) == 0) { errno = EPERM; die("dropping privileges"); }
    if (o->dir && chdir(o->dir) != 0) die(o->dir);
}

/* -R: copy one regular file to stdout, at most cap + 1 bytes (the caller sees it is over). */
static int read_file(const char *path, long cap) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { fprintf(stderr, "arex-run: %s: %s\n", path, strerror(errno)); return errno == ENOENT || errno == ENOTDIR ? 2 : 1; }
    struct stat st;
    if (fstat(fd, &st) != 0) return 1;
    if (S_ISDIR(st.st_mode)) { fprintf(stderr, "arex-run: %s: is a folder\n", path); return 3; }
    if (!S_ISREG(st.st_mode)) { fprintf(stderr, "arex-run: %s: not a regular file\n", path); return 4; }
    char buf[65536];
    long left = cap + 1;
    for (ssize_t n; left > 0 && (n = read(fd, buf, left < (long)sizeof buf ? left : (long)sizeof buf)) > 0; left -= n)
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(1, buf + off, n - off);
            if (w <= 0) return 1;
            off += w;
        }
    return 0;
}

/* -W: replace one regular file with stdin (parents made first), mode applied at the end. */
static int write_file(const char *path, int mode) {
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    for (char *p = parent + 1; (p = strchr(p, '/')); *p++ = '/') {
        *p = 0;
        if (mkdir(parent, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "arex-run: %s: %s\n", parent, strerror(errno)); return 1; }
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) { fprintf(stderr, "arex-run: %s: %s\n", path, strerror(errno)); return errno == EROFS ? 5 : 1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { fprintf(stderr, "arex-run: %s: not a regular file\n", path); return 4; }
    if (ftruncate(fd, 0) != 0) return 1;
    char buf[65536];
    for (ssize_t n; (n = read(0, buf, sizeof buf)) > 0;)
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, n - off);
            if (w <= 0) { fprintf(stderr, "arex-run: %s: %s\n", path, strerror(errno)); return 1; }
            off += w;
        }
    if (fchmod(fd, mode) != 0) return 1;
    return close(fd) == 0 ? 0 : 1;
}

static void parse(int argc, char **argv, struct opts *o, int *first) {
    int c;
    memset(o, 0, sizeof *o);
    o->uid = 1000, o->gid = 1000, o->result_fd = -1, o->mode = 0644, o->read_cap = 1 << 30;
    while ((c = getopt(argc, argv, "+u:g:d:t:c:f:s:m:r:R:W:n:o:kK")) != -1) {
        switch (c) {
        case 'u': o->uid = (uid_t)atol(optarg); break;
        case 'g': o->gid = (gid_t)atol(optarg); break;
        case 'd': o->dir = optarg; break;
        case 't': o->wall = atof(optarg); break;
        case 'c': o->cpu = atol(optarg); break;
        case 'f': o->fsize = atol(optarg); break;
        case 's': o->stack = atol(optarg); break;
        case 'm': o->memory = atol(optarg); break;
        case 'r': o->result_fd = atoi(optarg); break;
        case 'R': o->read_path = optarg; break;
        case 'W': o->write_path = optarg; break;
        case 'n': o->read_cap = atol(optarg); break;
        case 'o': o->mode = (int)strtol(optarg, NULL, 8); break;
        case 'k': o->kill_tree = 1; break;
        case 'K': o->sweep = 1; break;
        default: fprintf(stderr, "arex-run: bad option\n"); _exit(125);
        }
    }
    *first = optind;
    if (o->uid == 0) { fprintf(stderr, "arex-run: refusing to run as root\n"); _exit(125); }
    if (!o->read_path && !o->write_path && optind >= argc) { fprintf(stderr, "arex-run: no command\n"); _exit(125); }
}

static void child(const struct opts *o, char **command, const sigset_t *mask) {
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (o->result_fd >= 0) close(o->result_fd);  /* the command must not write its own verdict */
    for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
    become_agent(o);
    if (o->read_path) _exit(read_file(o->read_path, o->read_cap));
    if (o->write_path) _exit(write_file(o->write_path, o->mode));
    execvp(command[0], command);
    fprintf(stderr, "arex-run: cannot run '%s': %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

int main(int argc, char **argv) {
    struct opts o;
    int first;
    parse(argc, argv, &o, &first);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("subreaper");
    sigset_t watched, old;
    sigemptyset(&watched);
    int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP};
    for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaddset(&watched, sigs[i]);
    sigprocmask(SIG_BLOCK, &watched, &old);  /* pending until sigtimedwait: no lost wake-up */
    struct tally t = {0, 0, 0};
    struct tally ignored = {0, 0, 0};
    if (o.sweep) kill_all(0, o.uid, &ignored);  /* nothing of an earlier run lives on */
    double deadline = o.wall > 0 ? now() + o.wall : 0;
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) child(&o, argv + first, &old);
    int status = 0, main_done = 0, timed_out = 0, killed = 0;
    while (!main_done) {
        struct rusage ru;
        int st;
        pid_t w;
        while ((w = wait4(-1, &st, WNOHANG, &ru)) > 0) {
            account(&t, &ru);
            if (w == pid) status = st, main_done = 1;
        }
        if (main_done || (w < 0 && errno == ECHILD)) break;
        double left = deadline > 0 ? deadline - now() : 3600;
        if (left <= 0) { timed_out = 1; break; }
        struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
        int sig = sigtimedwait(&watched, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) { killed = 1; break; }
    }
    if (timed_out || killed || o.kill_tree) kill_all(getpid(), -1, &t);
    if (o.sweep) kill_all(0, o.uid, &ignored);
    int code = main_done ? (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) : 137;
    int signal_number = main_done && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (o.result_fd >= 0) {
        dprintf(o.result_fd, "exit=%d signal=%d cpu_us=%lld maxrss_kb=%ld timed_out=%d killed=%d procs=%d\n",
                code, signal_number, t.cpu_us, t.maxrss_kb, timed_out, killed, t.procs);
    }
    return 0;
}
