/*
 * The sandbox ("pause") process of toposched's local real-kubelet nodes.
 *
 * It runs as PID 1 of every pod sandbox: it holds the pod's namespaces open, reaps the orphans
 * the pod's containers leave behind (PID 1 inherits them), and exits 0 on SIGTERM or SIGINT.
 * All signals it cares about are blocked and taken synchronously with sigwaitinfo(), so there is
 * no handler and no race between a signal and the wait.
 *
 * Built with `gcc -static -Os -s` by testkit.realnode.images; no other dependency.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    sigset_t wanted;
    siginfo_t info;

    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("toposched pause 1");
        return 0;
    }
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGTERM);
    sigaddset(&wanted, SIGINT);
    sigaddset(&wanted, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &wanted, NULL) != 0) {
        perror("pause: sigprocmask");
        return 1;
    }
    for (;;) {
        if (sigwaitinfo(&wanted, &info) < 0) {
            if (errno == EINTR)
                continue;
            perror("pause: sigwaitinfo");
            return 1;
        }
        if (info.si_signo == SIGCHLD) {
            /* One SIGCHLD may stand for several exits: reap until none is left. */
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0; /* SIGTERM or SIGINT */
    }
}
