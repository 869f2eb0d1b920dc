/* Running a test case in a forked child with its own environment (the device layer reads its
 * configuration once per process, so a case that needs other settings needs a fresh one). */
#ifndef IXL_TEST_IN_CHILD_H
#define IXL_TEST_IN_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Forks; the child sets IXL_CUDA_LIBRARY=lib (if lib) and name=value (if name), calls setup()
 * (if not NULL) and fn(arg), and exits 0. Checks the child's exit status (0), or that signal
 * sig ended it (sig != 0); arg names the child in a failure. */
static inline void check_in_child(const char *lib, const char *name, const char *value,
                                  void (*setup)(void), void (*fn)(const char *), const char *arg,
                                  int sig)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (lib != NULL)
            setenv("IXL_CUDA_LIBRARY", lib, 1);
        if (name != NULL)
            setenv(name, value, 1);
        if (setup != NULL)
            setup();
        fn(arg);
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (sig != 0) {
        if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
            check_fail(__FILE__, __LINE__, "child %s: want signal %d, status 0x%x", arg, sig, st);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        check_fail(__FILE__, __LINE__, "child %s failed (status 0x%x)", arg, st);
    }
}

#endif
