/*
 * A plain main() for the fuzz targets, with no libFuzzer: runs LLVMFuzzerTestOneInput() over
 * every file of the corpus directories (and every file) named on the command line, so the
 * corpus is a regression test that any compiler builds and the sanitizer builds run.
 *
 *   fuzz_md_replay tests/fuzz/corpus/md [crash-1234 ...]
 *
 * Each input is read into a buffer of exactly its size, so a read past the end is caught by
 * AddressSanitizer. Exit 0 when every input ran (a target that finds a bug aborts), 1 when an
 * argument cannot be read or no input was found at all: an empty corpus is not a pass.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Defined by the targets that need setup; weak, so the others link without one. */
#pragma weak LLVMFuzzerInitialize

/* Reads path into a new buffer of exactly its size (1 byte allocated for an empty file). */
static int read_file(const char *path, uint8_t **out, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fclose(f);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL || fread(buf, 1, len, f) != len) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    *out = buf;
    *out_len = len;
    return 0;
}

static int run_file(const char *path, size_t *ran)
{
    uint8_t *buf;
    size_t len;
    if (read_file(path, &buf, &len) != 0) {
        fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    (*ran)++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Runs every regular file of dir, in name order so that runs are reproducible. */
static int run_dir(const char *dir, size_t *ran)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **v = realloc(names, cap * sizeof(*v));
            if (v == NULL) {
                rc = -1;
                break;
            }
            names = v;
        }
        size_t plen = strlen(dir) + 1 + strlen(e->d_name) + 1;
        if ((names[n] = malloc(plen)) == NULL) {
            rc = -1;
            break;
        }
        snprintf(names[n++], plen, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (rc != 0)
        fprintf(stderr, "replay: out of memory listing %s\n", dir);
    if (n > 0)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode) &&
            run_file(names[i], ran) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <corpus dir or file>...\n", argv[0]);
        return 1;
    }
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    size_t ran = 0;
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            failed |= run_dir(argv[i], &ran) != 0;
        } else {
            failed |= run_file(argv[i], &ran) != 0;
        }
    }
    printf("replay: %zu input(s) ran\n", ran);
    if (ran == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return failed ? 1 : 0;
}
