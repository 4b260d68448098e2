/* The fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on every file named (or
 * every file in a directory named). The seed corpora and the regression inputs (crashes found,
 * and issue 15's reproducers) run so in every build's tests (meson test --suite fuzz), with the
 * build's own compiler and sanitizers; tools/fuzz runs the real fuzzer. */
#include "fuzz_input.h"

#include <dirent.h>
#include <sys/stat.h>

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while (buf != NULL && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            uint8_t *b2 = realloc(buf, cap *= 2);
            if (b2 == NULL) free(buf);
            buf = b2;
        }
    }
    fclose(f);
    if (buf == NULL) return 1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int failed = 0, ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: no such file or directory\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= run_file(argv[i]);
            ran++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            failed |= run_file(path);
            ran++;
        }
        if (d != NULL) closedir(d);
    }
    printf("ran %d inputs\n", ran);
    return failed || ran == 0;
}
