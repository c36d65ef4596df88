/*
 * tool_run.h — runs a client tool (physctl, physload) as a child process
 * for the client tests and collects its exit code, stdout and stderr.
 */
#ifndef PHYSD_TOOL_RUN_H
#define PHYSD_TOOL_RUN_H

#include <stddef.h>
#include <stdio.h>

typedef struct tool_result {
    int code;  /* exit code, or 128 + signal */
    char *out; /* stdout, NUL-terminated (free) */
    char *err; /* stderr, NUL-terminated (free) */
} tool_result;

/* Runs argv (argv[0] is the program path, NULL-terminated); returns 0 or
 * -1 when the child could not be started. */
int tool_run(char *const argv[], tool_result *r);
void tool_result_free(tool_result *r);

/* A child started without waiting (tool_start), finished by tool_wait. */
typedef struct tool_proc {
    int pid;
    FILE *out, *err;
} tool_proc;

int tool_start(char *const argv[], tool_proc *p);
/* Waits for the child and collects its result (as tool_run). */
void tool_wait(tool_proc *p, tool_result *r);

#endif
