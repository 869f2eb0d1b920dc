/*
 * The entry point every fuzz target defines. libFuzzer calls it with each input (the bytes are
 * borrowed for the call); replay_main.c calls it with the files of a corpus. It returns 0; a
 * target aborts on any result that breaks its oracle, so both drivers report it as a crash.
 */
#ifndef IXL_TEST_FUZZ_H
#define IXL_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time setup, called before the first input by libFuzzer and by replay_main.c. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
