/*
 * tool_run.c — see tool_run.h. The child's stdout and stderr go to two
 * temporary files (no pipe deadlocks), read back once it has exited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool_run.h"

static char *slurp(FILE *f) {
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (!b) return NULL;
    size_t got = n > 0 ? fread(b, 1, (size_t)n, f) : 0;
    b[got] = 0;
    return b;
}

int tool_start(char *const argv[], tool_proc *p) {
    memset(p, 0, sizeof *p);
    p->out = tmpfile();
    p->err = tmpfile();
    if (!p->out || !p->err) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fileno(p->out), 1);
        dup2(fileno(p->err), 2);
        execv(argv[0], argv);
        _exit(127);
    }
    p->pid = (int)pid;
    return 0;
}

void tool_wait(tool_proc *p, tool_result *r) {
    memset(r, 0, sizeof *r);
    int st = 0;
    while (waitpid((pid_t)p->pid, &st, 0) < 0)
        ;
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = slurp(p->out);
    r->err = slurp(p->err);
    fclose(p->out);
    fclose(p->err);
    memset(p, 0, sizeof *p);
}

int tool_run(char *const argv[], tool_result *r) {
    tool_proc p;
    if (tool_start(argv, &p)) return -1;
    tool_wait(&p, r);
    return 0;
}

void tool_result_free(tool_result *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}
