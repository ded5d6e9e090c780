/* Fault injection for tests, loaded with LD_PRELOAD: a disk that fills up, or a disk that
 * fails. Files whose path contains PRISM_FAIL_WRITES_PATH are watched:
 * - PRISM_FAIL_WRITES_ERRNO unset or ENOSPC: each watched file may extend to
 *   PRISM_FAIL_WRITES_AFTER bytes; a write (write, pwrite) or a space reservation (fallocate)
 *   that would take it further fails with ENOSPC and writes nothing, as on a full disk (space
 *   below the file's furthest byte so far stays usable: rewrites in place succeed).
 * - PRISM_FAIL_WRITES_ERRNO=EIO: once PRISM_FAIL_WRITES_AFTER bytes were written to watched
 *   files, every further write to them fails with EIO.
 * Not part of prism: it only makes the operating system's errors happen on cue. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 1024
#define MAX_FILES 64
static char watched[MAX_FDS];
static struct {
    dev_t dev;
    ino_t ino;
    long long end; /* furthest byte written or reserved */
} files[MAX_FILES];
static int file_count = 0;
static long long written = 0;

static const char* pattern(void) { return getenv("PRISM_FAIL_WRITES_PATH"); }

static int io_error_mode(void) {
    const char* e = getenv("PRISM_FAIL_WRITES_ERRNO");
    return e != NULL && strcmp(e, "EIO") == 0;
}

static long long limit(void) {
    const char* l = getenv("PRISM_FAIL_WRITES_AFTER");
    return l == NULL ? -1 : atoll(l);
}

/* The furthest byte of fd's file, by inode (several descriptors may share a file). */
static long long* end_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    for (int i = 0; i < file_count; ++i) {
        if (files[i].dev == st.st_dev && files[i].ino == st.st_ino) return &files[i].end;
    }
    if (file_count == MAX_FILES) return NULL;
    files[file_count].dev = st.st_dev;
    files[file_count].ino = st.st_ino;
    files[file_count].end = st.st_size;
    return &files[file_count++].end;
}

static void track(int fd, const char* path) {
    const char* p = pattern();
    if (fd >= 0 && fd < MAX_FDS) watched[fd] = p != NULL && path != NULL && strstr(path, p) != NULL;
    if (fd >= 0 && fd < MAX_FDS && watched[fd]) (void)end_of(fd);
}

/* Whether extending fd's file to [offset, offset + n) must fail. */
static int refuse(int fd, long long offset, long long n) {
    if (fd < 0 || fd >= MAX_FDS || !watched[fd] || limit() < 0) return 0;
    if (io_error_mode()) {
        if (written + n > limit()) {
            errno = EIO;
            return 1;
        }
        written += n;
        return 0;
    }
    long long* end = end_of(fd);
    if (end == NULL || offset + n <= *end) return 0;
    if (offset + n > limit()) {
        errno = ENOSPC;
        return 1;
    }
    *end = offset + n;
    return 0;
}

#define OPEN_WRAPPER(name)                                                          \
    int name(const char* path, int flags, ...) {                                    \
        static int (*real)(const char*, int, ...) = NULL;                           \
        if (real == NULL) real = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, #name); \
        mode_t mode = 0;                                                            \
        if (flags & (O_CREAT | O_TMPFILE)) {                                        \
            va_list ap;                                                             \
            va_start(ap, flags);                                                    \
            mode = (mode_t)va_arg(ap, int);                                         \
            va_end(ap);                                                             \
        }                                                                           \
        const int fd = real(path, flags, mode);                                     \
        track(fd, path);                                                            \
        return fd;                                                                  \
    }
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

#define PWRITE_WRAPPER(name)                                                                    \
    ssize_t name(int fd, const void* buf, size_t n, off_t offset) {                             \
        static ssize_t (*real)(int, const void*, size_t, off_t) = NULL;                         \
        if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, #name); \
        if (refuse(fd, (long long)offset, (long long)n)) return -1;                             \
        return real(fd, buf, n, offset);                                                        \
    }
PWRITE_WRAPPER(pwrite)
PWRITE_WRAPPER(pwrite64)

ssize_t write(int fd, const void* buf, size_t n) {
    static ssize_t (*real)(int, const void*, size_t) = NULL;
    if (real == NULL) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
    if (fd >= 0 && fd < MAX_FDS && watched[fd] &&
        refuse(fd, (long long)lseek(fd, 0, SEEK_CUR), (long long)n)) {
        return -1;
    }
    return real(fd, buf, n);
}

#define FALLOCATE_WRAPPER(name)                                                        \
    int name(int fd, int mode, off_t offset, off_t len) {                              \
        static int (*real)(int, int, off_t, off_t) = NULL;                             \
        if (real == NULL) real = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, #name); \
        if (!io_error_mode() && refuse(fd, (long long)offset, (long long)len)) return -1; \
        return real(fd, mode, offset, len);                                            \
    }
FALLOCATE_WRAPPER(fallocate)
FALLOCATE_WRAPPER(fallocate64)
