/*
 * fanout.h — physd-streambench --subscribers N (fanout.c): the lean reader
 * of N subscribers of one world. argc/argv are the tool's own (the flags of
 * its usage line); prints one JSON object, returns the exit status.
 */
#ifndef PHYSD_STREAMBENCH_FANOUT_H
#define PHYSD_STREAMBENCH_FANOUT_H

int fanout_main(int argc, char **argv);

#endif
