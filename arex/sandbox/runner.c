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
 *     sends one when the output floods). With -T the wall clock is a backstop that a busy host
 *     cannot trip: time the tree spent runnable but waiting for a CPU (the kernel's run_delay)
 *     extends the deadline, up to the hard cap -T. A program that sleeps or blocks is still
 *     stopped at -t; one starved by other load gets its CPU time, and its CPU limit decides.
 *     The wait is summed over the tree's life (see `starvation`), so a chain of processes (a
 *     compiler driver's cc1plus, as, ld) keeps the wait of those already gone.
 * With -R / -W it reads or writes one file as the agent's user instead of running a command, so the
 * root server never opens a path the agent controls (a symlink would make it a confused deputy).
 *
 * The result is one line on the descriptor given by -r:
 *   exit=N signal=N cpu_us=N maxrss_kb=N timed_out=0|1 killed=0|1 procs=N starved_us=N capped=0|1
 * starved_us: how long the tree waited for a CPU; capped: the timeout fired at the hard cap -T, the
 * deadline having been moved that far by the wait (the host's load ran out the clock, not the command).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
    uid_t uid;
    gid_t gid;
    const char *dir, *read_path, *write_path;
    double wall, hard_wall;
    long cpu, fsize, stack, memory, read_cap;
    int mode, result_fd, kill_tree, sweep;
};

struct tally {
    long long cpu_us;
    long maxrss_kb;
    int procs;
};

static const char *interactive_spec;  /* -I: see interactive_main */
static int batch;  /* -B: see batch_main */
static long batch_output_cap = 64L << 20;  /* -O */
static const char *batch_stop;  /* -S */

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

/* Nanoseconds `tid` of `pid` has waited runnable for a CPU (second field of schedstat; 0 if gone). */
static long long run_delay(pid_t pid, const char *tid) {
    char path[96], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    long long on_cpu = 0, waited = 0;
    if (n <= 0) return 0;
    buf[n] = 0;
    return sscanf(buf, "%lld %lld", &on_cpu, &waited) == 2 ? waited : 0;
}

/* Starvation: the time the tree waited runnable for a CPU, summed over intervals (each ends at a reap
 * or a deadline check), each interval counting the longest wait any one thread had in it. Threads
 * waiting side by side count their wait once; one after another (a compiler driver's cc1plus, then
 * as, then ld), each counts. A tree's own threads queueing for its one CPU count too, but never
 * more than the CPU time the tree used meanwhile, which its CPU limit bounds. A process's last wait
 * is read while it is a zombie (`note_reaped`): once reaped, its /proc entry is gone. */
#define TRACKED 4096
static struct { pid_t tid; long long delay; int seen; } tracked[TRACKED];
static int ntracked;
static long long starved_ns, pending_ns;

/* The wait of thread `tid` since it was last seen (all of it if new); remembers the new total. */
static long long waited_since(pid_t tid, long long delay) {
    for (int i = 0; i < ntracked; i++)
        if (tracked[i].tid == tid) {
            long long grew = delay - tracked[i].delay;
            tracked[i].delay = delay, tracked[i].seen = 1;
            return grew > 0 ? grew : 0;
        }
    if (ntracked < TRACKED) tracked[ntracked].tid = tid, tracked[ntracked].delay = delay, tracked[ntracked++].seen = 1;
    return delay;
}

/* End an interval: add the longest wait in it of any thread of the live tree below `root`, or of
 * a process reaped during it; forget threads that are gone. Returns the total in seconds. */
static double starvation(pid_t root) {
    static pid_t tree[65536];
    int n = collect(root, -1, tree, 65536);
    long long longest = pending_ns;
    for (int i = 0; i < ntracked; i++) tracked[i].seen = 0;
    for (int i = 0; i < n; i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/task", tree[i]);
        DIR *tasks = opendir(dir);
        if (!tasks) continue;
        for (struct dirent *e; (e = readdir(tasks));) {
            if (e->d_name[0] == '.') continue;
            long long grew = waited_since((pid_t)atoi(e->d_name), run_delay(tree[i], e->d_name));
            if (grew > longest) longest = grew;
        }
        closedir(tasks);
    }
    int kept = 0;
    for (int i = 0; i < ntracked; i++)
        if (tracked[i].seen) tracked[kept++] = tracked[i];
    ntracked = kept;
    starved_ns += longest, pending_ns = 0;
    return starved_ns / 1e9;
}

/* Before reaping `pid` (a zombie): its last wait joins the current interval. A wait of over a
 * millisecond ends the interval (what runs after it waits in the next); a shorter one, as every
 * process has on a quiet host, costs no scan of /proc. */
static void note_reaped(pid_t pid, pid_t root) {
    char tid[16];
    snprintf(tid, sizeof tid, "%d", pid);
    long long grew = waited_since(pid, run_delay(pid, tid));
    if (grew > pending_ns) pending_ns = grew;
    if (grew > 1000000) starvation(root);
}

/* Reap one ended process of the tree below `root` (WNOHANG), noting its wait first: wait4's
 * return (0: none ended; -1 with ECHILD: no child left). */
static pid_t reap_one(pid_t root, int *status, struct rusage *ru) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -1;
    if (info.si_pid == 0) return 0;
    note_reaped(info.si_pid, root);
    return wait4(info.si_pid, status, 0, ru);
}

/* The deadline after `left` ran out: moved by the tree's wait for a CPU, never back, at most `cap`. */
static double moved_deadline(double started, double wall, double deadline, double cap) {
    double moved = started + wall + starvation(getpid());
    if (moved > cap) moved = cap;
    return moved > deadline ? moved : deadline;
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
    while ((c = getopt(argc, argv, "+u:g:d:t:T:c:f:s:m:r:R:W:n:o:kKI:BO:S:")) != -1) {
        switch (c) {
        case 'u': o->uid = (uid_t)atol(optarg); break;
        case 'g': o->gid = (gid_t)atol(optarg); break;
        case 'd': o->dir = optarg; break;
        case 't': o->wall = atof(optarg); break;
        case 'T': o->hard_wall = atof(optarg); break;
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
        case 'I': interactive_spec = optarg; break;  /* interactive mode, below */
        case 'B': batch = 1; break;  /* batch mode, below */
        case 'O': batch_output_cap = atol(optarg); break;
        case 'S': batch_stop = optarg; break;
        default: fprintf(stderr, "arex-run: bad option\n"); _exit(125);
        }
    }
    *first = optind;
    if (o->uid == 0) { fprintf(stderr, "arex-run: refusing to run as root\n"); _exit(125); }
    if (!o->read_path && !o->write_path && optind >= argc) { fprintf(stderr, "arex-run: no command\n"); _exit(125); }
}

static void place_fds(const int fds[4]);

/* The command's process: `fds` (batch mode) become its stdin, stdout and stderr, every other
 * descriptor of the runner closed (the batch stream, the result fd); else it inherits the runner's. */
static void child(const struct opts *o, char **command, const sigset_t *mask, const int *fds) {
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (o->result_fd >= 0) close(o->result_fd);  /* the command must not write its own verdict */
    if (fds) place_fds(fds);
    for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
    become_agent(o);
    if (o->read_path) _exit(read_file(o->read_path, o->read_cap));
    if (o->write_path) _exit(write_file(o->write_path, o->mode));
    execvp(command[0], command);
    fprintf(stderr, "arex-run: cannot run '%s': %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

/* ---- Interactive mode (-I N:UID:CPU:MEMORY) ------------------------------------------------
 * Runs an interactor beside the command, connected by two pipes: the command's stdout is the
 * interactor's stdin and the other way round. The interactor (the first N arguments of the command
 * line) is trusted judge code holding the test's data, so it runs as its own uid (never the
 * agent's: the command cannot signal, ptrace or open its files and /proc entries), under its own
 * CPU and address-space limits, keeping the OOM score it inherited (the command's is raised, so
 * under memory pressure the command dies first). The interactor's stderr is this runner's stdout
 * and its fd 3 is this runner's stdin (the host's staging stream); the command holds neither,
 * only its two pipes and this runner's stderr.
 * The runner keeps every pipe end open until it has reaped a side's main process, so neither side
 * sees the other's end (end of file, EPIPE) before the runner knows who ended first: a command
 * that crashes because the interactor hung up after a wrong answer is seen to end second. When a
 * main process ends, what is left of its side (by uid) is killed. Processes are counted on the
 * side of the real uid the kernel reports when they are reaped. The result line adds
 *   ia_exit=N ia_signal=N ia_cpu_us=N ia_maxrss_kb=N first=command|interactor|none
 */
struct side {
    pid_t pid;
    uid_t uid;
    int done, status;
    struct tally t;
};

/* In a child: descriptors 0-3 become fds[0..3] (-1: closed); every other one is closed. */
static void place_fds(const int fds[4]) {
    int high[4];
    for (int i = 0; i < 4; i++) {
        high[i] = fds[i] >= 0 ? fcntl(fds[i], F_DUPFD_CLOEXEC, 100) : -1;
        if (fds[i] >= 0 && high[i] < 0) die("dup");
    }
    for (int i = 0; i < 4; i++) {
        if (high[i] >= 0 && dup2(high[i], i) < 0) die("dup2");
        if (high[i] < 0) close(i);
    }
    for (int fd = 4; fd < 1024; fd++) close(fd);  /* the result fd, the runner's pipe ends */
}

#define JUDGE_STACK (64L << 20)  /* the interactor's stack, and each of its threads' */

/* The interactor's identity: its own uid and limits, its OOM score left as inherited. */
static void become_judge(uid_t uid, long cpu, long memory, long fsize) {
    setsid();
    if (cpu > 0) set_limit(RLIMIT_CPU, cpu, cpu + 1);
    /* Not the stack at the address-space size: glibc sizes every thread's stack by RLIMIT_STACK, so
     * an interactor starting one thread (a real Kattis validator does) could not map it. */
    if (memory > 0) set_limit(RLIMIT_AS, memory, memory), set_limit(RLIMIT_STACK, JUDGE_STACK, JUDGE_STACK);
    if (fsize > 0) set_limit(RLIMIT_FSIZE, fsize, fsize);
    set_limit(RLIMIT_CORE, 0, 0);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) die("dropping to the judge's uid");
    if (setuid(0) == 0 || getuid() != uid || geteuid() != uid) { errno = EPERM; die("dropping to the judge's uid"); }
    if (chdir("/") != 0) die("/");
}

/* Start one side: the interactor when cpu >= 0 (its uid, limits), else the command as the agent. */
static pid_t start_side(const struct opts *o, uid_t uid, long cpu, long memory, char **command, const int fds[4], const sigset_t *mask) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid > 0) return pid;
    sigprocmask(SIG_SETMASK, mask, NULL);
    for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
    place_fds(fds);
    if (cpu >= 0) become_judge(uid, cpu, memory, o->fsize);
    else become_agent(o);
    execvp(command[0], command);
    fprintf(stderr, "arex-run: cannot run '%s': %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

/* Kill every process of `uid` without reaping (the caller reaps, counting each on its side). */
static int kill_uid(uid_t uid) {
    static pid_t victims[65536];
    int n = collect(0, uid, victims, 65536);
    for (int i = 0; i < n; i++) kill(victims[i], SIGKILL);
    return n;
}

/* Reap what has ended. When a side's main process ends, the runner lets go of the pipe ends
 * that kept the other side from seeing it (ends: to_ia read, to_ia write, to_cmd read, to_cmd
 * write), and the rest of that side is killed. */
static void reap_sides(struct side s[2], int *first, int ends[4]) {
    static const int lets_go[2][2] = {{1, 2}, {3, 0}};  /* command ended: to_ia write, to_cmd read */
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
        note_reaped(info.si_pid, getpid());
        struct rusage ru;
        int st;
        if (wait4(info.si_pid, &st, 0, &ru) != info.si_pid) return;
        int k = info.si_pid == s[1].pid || (info.si_pid != s[0].pid && info.si_uid == s[1].uid);
        account(&s[k].t, &ru);
        if (info.si_pid != s[k].pid) continue;
        s[k].status = st, s[k].done = 1;
        if (!*first) *first = k + 1;
        for (int i = 0; i < 2; i++)
            if (ends[lets_go[k][i]] >= 0) close(ends[lets_go[k][i]]), ends[lets_go[k][i]] = -1;
        kill_uid(s[k].uid);
    }
}

static int exit_code(const struct side *s) {
    return s->done ? (WIFEXITED(s->status) ? WEXITSTATUS(s->status) : 128 + WTERMSIG(s->status)) : 137;
}

/* Wait for both sides (or the deadline, or SIGTERM); 1 timed out, 3 timed out at the hard cap, 2
 * killed, 0 both ended. */
static int wait_sides(const struct opts *o, struct side s[2], int *first, int ends[4], const sigset_t *watched) {
    double started = now(), deadline = o->wall > 0 ? started + o->wall : 0;
    double cap = o->hard_wall > o->wall ? started + o->hard_wall : deadline;
    for (;;) {
        reap_sides(s, first, ends);
        int leftovers = 0;
        for (int k = 0; k < 2; k++)
            if (s[k].done) leftovers += kill_uid(s[k].uid);
        if (s[0].done && s[1].done) return 0;
        double left = deadline > 0 ? deadline - now() : 3600;
        if (left <= 0 && deadline < cap) {  /* starved, not idle: move the deadline by the wait */
            deadline = moved_deadline(started, o->wall, deadline, cap);
            left = deadline - now();
        }
        if (left <= 0) return deadline >= cap && cap > started + o->wall ? 3 : 1;
        if (leftovers && left > 0.005) left = 0.005;  /* poll while a finished side dies */
        struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
        int sig = sigtimedwait(watched, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) return 2;
    }
}

static int interactive_main(const struct opts *o, char **command, int count, const sigset_t *watched, const sigset_t *old) {
    int n = 0;
    long uid = -1, cpu = 0, memory = 0;
    if (sscanf(interactive_spec, "%d:%ld:%ld:%ld", &n, &uid, &cpu, &memory) != 4 || n < 1 || n >= count || uid <= 0 || uid == (long)o->uid || cpu < 0) {
        fprintf(stderr, "arex-run: bad -I (want N:UID:CPU:MEMORY, N below the argument count, UID neither root nor the command's)\n");
        _exit(125);
    }
    struct side s[2];
    memset(s, 0, sizeof s);
    s[0].uid = o->uid, s[1].uid = (uid_t)uid;
    struct tally ignored = {0, 0, 0};
    if (o->sweep) kill_all(0, s[0].uid, &ignored), kill_all(0, s[1].uid, &ignored);
    int to_ia[2], to_cmd[2];
    if (pipe2(to_ia, O_CLOEXEC) != 0 || pipe2(to_cmd, O_CLOEXEC) != 0) die("pipe");
    int ends[4] = {to_ia[0], to_ia[1], to_cmd[0], to_cmd[1]};
    int ia_fds[4] = {to_ia[0], to_cmd[1], 1, 0}, cmd_fds[4] = {to_cmd[0], to_ia[1], 2, -1};
    char **ia_argv = calloc(n + 1, sizeof *ia_argv);
    if (!ia_argv) die("calloc");
    memcpy(ia_argv, command, n * sizeof *ia_argv);
    s[1].pid = start_side(o, s[1].uid, cpu, memory, ia_argv, ia_fds, old);
    s[0].pid = start_side(o, s[0].uid, -1, 0, command + n, cmd_fds, old);
    int first = 0, how = wait_sides(o, s, &first, ends, watched);
    for (int pass = 0; pass < 200; pass++) {  /* nothing of either side outlives the run */
        int left = kill_uid(s[0].uid) + kill_uid(s[1].uid);
        reap_sides(s, &first, ends);
        if (!left) break;
        usleep(2000);
    }
    for (int i = 0; i < 4; i++)
        if (ends[i] >= 0) close(ends[i]);
    if (o->result_fd >= 0) {
        const char *who[] = {"none", "command", "interactor"};
        dprintf(o->result_fd, "exit=%d signal=%d cpu_us=%lld maxrss_kb=%ld timed_out=%d killed=%d procs=%d "
                "ia_exit=%d ia_signal=%d ia_cpu_us=%lld ia_maxrss_kb=%ld first=%s starved_us=%lld capped=%d\n",
                exit_code(&s[0]), s[0].done && WIFSIGNALED(s[0].status) ? WTERMSIG(s[0].status) : 0, s[0].t.cpu_us, s[0].t.maxrss_kb,
                how == 1 || how == 3, how == 2, s[0].t.procs, exit_code(&s[1]), s[1].done && WIFSIGNALED(s[1].status) ? WTERMSIG(s[1].status) : 0,
                s[1].t.cpu_us, s[1].t.maxrss_kb, who[first], starved_ns / 1000, how == 3);
    }
    return 0;
}

/* ---- One run, and batch mode (-B) -------------------------------------------------------------
 * Batch mode runs the command once per test of a grading, in one runner: the tests' inputs arrive
 * on this runner's stdin, each as its length in decimal, a newline and its bytes. Each test's run
 * is exactly one run of the single mode (`supervise`: the user swept before, hard limits, the tree
 * reaped and killed, the user swept after, its own wait for a CPU), always isolated (-k -K), with
 * the test's input written to a pipe that is its stdin and its stdout and stderr read from pipes,
 * at most -O bytes together (over that the tree is killed: output_limit=1). Per test, one line on
 * this runner's stdout, then the bytes of its stdout and its stderr:
 *   exit=N signal=N cpu_us=N maxrss_kb=N timed_out=0|1 killed=0|1 procs=N starved_us=N capped=0|1
 *   output_limit=0|1 sigkilled=0|1 us=N out=N err=N
 * The command holds neither this runner's stdin (the next tests' inputs) nor its stdout (the
 * results): only its own three pipes. The batch stops after a run stopped at its hard cap (capped:
 * the host runs that test again before any later one), after a run in which a process of the tree
 * was killed by a SIGKILL the runner did not send (sigkilled: the kernel's OOM killer, which the
 * host attributes to that run, the last of the batch), on SIGTERM, and with -S CPU_US:MAXRSS_KB
 * after the first run that failed (exit status, signal, timeout, output, CPU or memory over those).
 * The line on -r counts the tests run: tests=N.
 */
struct io {
    int in, out, err, sig;  /* the runner's ends of the test's pipes (-1 once closed); a signalfd */
    const char *input;
    size_t len, sent;
    char *buf[2];
    size_t got[2], room[2];
    long cap;
    int flood;
};

struct outcome {
    struct tally t;
    int code, signal_number, main_done, timed_out, killed, capped, sigkilled;
    double seconds;
};

/* Write what the pipe takes of the test's input; close it when all is written or nobody reads. */
static void feed_input(struct io *io) {
    while (io->in >= 0 && io->sent < io->len) {
        ssize_t n = write(io->in, io->input + io->sent, io->len - io->sent);
        if (n > 0) { io->sent += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        break;  /* EPIPE: the command stopped reading, its business */
    }
    if (io->in >= 0) close(io->in), io->in = -1;
}

/* Read what is there of stdout (k=0) or stderr (k=1); over the cap it is dropped and `flood` set. */
static void take_output(struct io *io, int k) {
    int *fd = k ? &io->err : &io->out;
    char chunk[65536];
    while (*fd >= 0) {
        ssize_t n = read(*fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) { close(*fd), *fd = -1; return; }
        if ((long)(io->got[0] + io->got[1]) + n > io->cap) { io->flood = 1; continue; }
        if (io->got[k] + (size_t)n > io->room[k]) {
            size_t room = io->room[k] ? io->room[k] : 65536;
            while (room < io->got[k] + (size_t)n) room *= 2;
            char *grown = realloc(io->buf[k], room);
            if (!grown) die("realloc");
            io->buf[k] = grown, io->room[k] = room;
        }
        memcpy(io->buf[k] + io->got[k], chunk, (size_t)n);
        io->got[k] += (size_t)n;
    }
}

/* Wait up to `left` seconds for a signal: its number, or 0 (-1) if none came. In batch mode the
 * test's input is written and its output read meanwhile. */
static int wait_signal(const sigset_t *watched, double left, struct io *io) {
    if (!io) {
        struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
        return sigtimedwait(watched, NULL, &ts);
    }
    struct pollfd p[4] = {{io->sig, POLLIN, 0}, {io->in, POLLOUT, 0}, {io->out, POLLIN, 0}, {io->err, POLLIN, 0}};
    if (poll(p, 4, (int)(left * 1000) + 1) < 0 && errno != EINTR) die("poll");
    if (p[1].revents) feed_input(io);
    for (int k = 0; k < 2; k++)
        if (p[2 + k].revents) take_output(io, k);
    struct signalfd_siginfo si;
    int sig = 0;
    while (read(io->sig, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD || !sig) sig = (int)si.ssi_signo;
    return sig;
}

/* Batch mode: the test's pipes; the command's ends in `fds` (stdin, stdout, stderr), ours non-blocking. */
static void open_pipes(struct io *io, int fds[4]) {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) die("pipe");
    fds[0] = in[0], fds[1] = out[1], fds[2] = err[1], fds[3] = -1;
    io->in = in[1], io->out = out[0], io->err = err[0];
    int ours[3] = {in[1], out[0], err[0]};
    for (int i = 0; i < 3; i++) fcntl(ours[i], F_SETFL, fcntl(ours[i], F_GETFL) | O_NONBLOCK);
}

/* After the run (its tree and the user's processes killed): the rest of its output, the pipes closed. */
static void drain(struct io *io) {
    double until = now() + 2.0;  /* every writer is dead; a bound all the same, as the server's */
    while ((io->out >= 0 || io->err >= 0) && now() < until) {
        struct pollfd p[2] = {{io->out, POLLIN, 0}, {io->err, POLLIN, 0}};
        poll(p, 2, 100);
        for (int k = 0; k < 2; k++)
            if (p[k].revents) take_output(io, k);
    }
    int *ends[3] = {&io->in, &io->out, &io->err};
    for (int i = 0; i < 3; i++)
        if (*ends[i] >= 0) close(*ends[i]), *ends[i] = -1;
}

/* One run of the command: the whole of single mode, or one test in batch mode (`io`: its pipes). */
static void supervise(struct opts o, char **command, const sigset_t *watched, const sigset_t *old, struct io *io, struct outcome *r) {
    struct tally t = {0, 0, 0};
    struct tally ignored = {0, 0, 0};
    starved_ns = pending_ns = 0, ntracked = 0;  /* each run's wait for a CPU is its own */
    if (o.sweep) kill_all(0, o.uid, &ignored);  /* nothing of an earlier run lives on */
    double started = now(), deadline = o.wall > 0 ? started + o.wall : 0;
    double cap = o.hard_wall > o.wall ? started + o.hard_wall : deadline;
    int fds[4] = {-1, -1, -1, -1};
    if (io) open_pipes(io, fds);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) child(&o, command, old, io ? fds : NULL);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0) close(fds[i]);
    if (io) feed_input(io);
    int status = 0, main_done = 0, timed_out = 0, killed = 0, capped = 0, sigkilled = 0;
    while (!main_done) {
        struct rusage ru;
        int st;
        pid_t w;
        while ((w = reap_one(getpid(), &st, &ru)) > 0) {
            account(&t, &ru);
            if (w == pid) status = st, main_done = 1;
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) sigkilled = 1;  /* not by us: we kill below */
        }
        if (main_done || (w < 0 && errno == ECHILD)) break;
        double left = deadline > 0 ? deadline - now() : 3600;
        if (left <= 0 && deadline < cap) {  /* starved, not idle: move the deadline by the wait */
            deadline = moved_deadline(started, o.wall, deadline, cap);
            left = deadline - now();
        }
        if (left <= 0) { timed_out = 1, capped = deadline >= cap && cap > started + o.wall; break; }
        int sig = wait_signal(watched, left, io);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) { killed = 1; break; }
        if (io && io->flood) break;  /* batch mode's output cap: the tree is killed (-k) */
    }
    if (timed_out || killed || o.kill_tree) kill_all(getpid(), -1, &t);
    if (o.sweep) kill_all(0, o.uid, &ignored);
    int code = main_done ? (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) : 137;
    if (io) drain(io);
    *r = (struct outcome){t, code, main_done && WIFSIGNALED(status) ? WTERMSIG(status) : 0, main_done, timed_out,
                          killed, capped, sigkilled, now() - started};
}

static void write_all(int fd, const char *data, size_t len) {
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("writing a result");
        off += (size_t)n;
    }
}

/* The next test's input from stdin (malloc'd, *len bytes); NULL at the end of the batch. */
static char *next_input(size_t *len) {
    char digits[24];
    size_t n = 0;
    for (;;) {
        ssize_t got = read(0, digits + n, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return NULL;
        if (digits[n] == '\n') break;
        if (++n >= sizeof digits - 1) { errno = EINVAL; die("a test's length"); }
    }
    digits[n] = 0;
    *len = (size_t)strtoull(digits, NULL, 10);
    char *input = malloc(*len ? *len : 1);
    if (!input) die("malloc");
    for (size_t off = 0; off < *len;) {
        ssize_t got = read(0, input + off, *len - off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) { errno = EPIPE; die("a test's input"); }
        off += (size_t)got;
    }
    return input;
}

static int batch_main(struct opts *o, char **command, const sigset_t *watched, const sigset_t *old, long out_cap, const char *stop) {
    long long stop_cpu = 0;
    long stop_rss = 0;
    if (stop && sscanf(stop, "%lld:%ld", &stop_cpu, &stop_rss) != 2) { fprintf(stderr, "arex-run: bad -S (want CPU_US:MAXRSS_KB)\n"); _exit(125); }
    o->kill_tree = o->sweep = 1;  /* every test's run is isolated */
    signal(SIGPIPE, SIG_IGN);  /* a program that stops reading its input; the command gets SIG_DFL back */
    struct io io;
    memset(&io, 0, sizeof io);
    io.sig = signalfd(-1, watched, SFD_NONBLOCK | SFD_CLOEXEC);
    if (io.sig < 0) die("signalfd");
    int tests = 0, stopped = 0;
    char *input;
    for (size_t len; !stopped && (input = next_input(&len));) {
        struct outcome r;
        io.input = input, io.len = len, io.sent = 0, io.got[0] = io.got[1] = 0, io.cap = out_cap, io.flood = 0;
        supervise(*o, command, watched, old, &io, &r);
        free(input);
        tests++;
        char line[512];
        int n = snprintf(line, sizeof line, "exit=%d signal=%d cpu_us=%lld maxrss_kb=%ld timed_out=%d killed=%d procs=%d "
                         "starved_us=%lld capped=%d output_limit=%d sigkilled=%d us=%lld out=%zu err=%zu\n",
                         r.code, r.signal_number, r.t.cpu_us, r.t.maxrss_kb, r.timed_out, r.killed, r.t.procs,
                         starved_ns / 1000, r.capped, io.flood, r.sigkilled, (long long)(r.seconds * 1e6), io.got[0], io.got[1]);
        write_all(1, line, (size_t)n);
        write_all(1, io.buf[0] ? io.buf[0] : "", io.got[0]);
        write_all(1, io.buf[1] ? io.buf[1] : "", io.got[1]);
        for (int k = 0; k < 2; k++)  /* its memory counts against the container's limit for the next run */
            free(io.buf[k]), io.buf[k] = NULL, io.room[k] = 0;
        int failed = r.code != 0 || r.signal_number || r.timed_out || io.flood || r.t.cpu_us > stop_cpu || r.t.maxrss_kb > stop_rss;
        stopped = r.killed || r.capped || r.sigkilled || (stop && failed);
    }
    if (o->result_fd >= 0)
        dprintf(o->result_fd, "exit=0 signal=0 cpu_us=0 maxrss_kb=0 timed_out=0 killed=0 procs=0 starved_us=0 capped=0 tests=%d\n", tests);
    return 0;
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
    if (interactive_spec) return interactive_main(&o, argv + first, argc - first, &watched, &old);
    if (batch) return batch_main(&o, argv + first, &watched, &old, batch_output_cap, batch_stop);
    struct outcome r;
    supervise(o, argv + first, &watched, &old, NULL, &r);
    if (o.result_fd >= 0) {
        dprintf(o.result_fd, "exit=%d signal=%d cpu_us=%lld maxrss_kb=%ld timed_out=%d killed=%d procs=%d "
                "starved_us=%lld capped=%d\n",
                r.code, r.signal_number, r.t.cpu_us, r.t.maxrss_kb, r.timed_out, r.killed, r.t.procs, starved_ns / 1000, r.capped);
    }
    return 0;
}
