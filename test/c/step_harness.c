/* step_harness: run a compiled nanocompile step program (a Qwen2 graph with
 * kv = "state") with no Python: prefill a prompt, then greedy decode.
 *
 *     step_harness MANIFEST
 *
 * C11 + POSIX (dlopen, mmap, getline, clock_gettime), libc and libdl only:
 *
 *     gcc -std=c11 -O2 -Wall -Wextra -Werror -o step_harness step_harness.c -ldl
 *
 * The manifest (test/py/backend/_harness.py writes it from a StepRunner) is
 * text, one directive a line: a keyword, then its fields separated by spaces.
 * Blank lines and lines starting with '#' are ignored. PATH and MESSAGE
 * fields are the rest of the line (they may hold spaces); NAME fields are one
 * word. Sizes and offsets are in bytes. The directives:
 *
 *     nc-step-harness 1            the first directive: the format and its version
 *     library PATH                 the shared library to dlopen
 *     entry NAME                   its entry is nc_run_NAME:
 *                                  int32_t (const int64_t *syms, void *const *io,
 *                                           char *arena, const int64_t *temp_offsets)
 *     blob PATH                    the file holding every weight's bytes (mmapped)
 *     capacity N                   the states' capacity (the symbol of role capacity)
 *     max_seq N                    the most tokens one call takes
 *     threads N                    optional: nc_pool_set_threads(N) first (a library
 *                                  without a pool runs on one thread: N must be 1)
 *     symbol NAME ROLE             the entry's symbols in order; ROLE is seq, past
 *                                  or capacity (seq and past once each)
 *     io KIND NAME SIZE [OFFSET]   the io slots in order; KIND is one of
 *                                    input   the token ids (i64): SIZE = 8 * max_seq
 *                                    state   zeroed once, updated in place (the KV cache)
 *                                    output  written by each call
 *                                    weight, packed  the SIZE bytes at OFFSET in the
 *                                            blob (OFFSET: a multiple of 64)
 *     logits NAME VOCAB FORM       the output holding the f32 logits, VOCAB to a row;
 *                                  FORM last: one row (the step's last position);
 *                                  FORM seq: one row per token of the call
 *     arena SIZE                   the temporaries' arena (allocated 64-byte aligned)
 *     temp OFFSET SIZE             each temporary in the entry's order: its offset
 *                                  in the arena (OFFSET + SIZE <= the arena's SIZE)
 *     requirement MESSAGE          optional, in order: the requirement a return of
 *                                  -k reports is the k-th
 *     launch NAME                  optional, in order: the kernel of each launch (a
 *                                  return of 256 * launch + code > 0 names it)
 *     prompt ID...                 the prompt's token ids (several lines append)
 *     decode N                     greedy decode steps after the prefill
 *     out_tokens PATH              the tokens, one decimal a line
 *     out_logits PATH              the logits rows, raw f32, one after another
 *     end                          last line (a truncated manifest has none)
 *
 * The run: the prefill is ceil(len(prompt) / max_seq) calls of at most
 * max_seq tokens (seq = tokens of the call, past = tokens before it); then
 * each of the N decode steps is one call of the previous token (seq = 1).
 * After the prefill and after each decode step, the last logits row is kept
 * and its argmax (the lowest index of the maximum; the first NaN if there is
 * one, as numpy.argmax) is the next token: N + 1 tokens and N + 1 rows. The
 * files are written only when every call returned 0.
 *
 * Every error (usage, manifest, file, allocation, dlopen/dlsym, a non-zero
 * return of the entry) is one line on stderr, "step_harness: ...", and exit
 * status 2 (setup) or 3 (a call failed). On success, one line on stdout:
 * the call count and the wall time of the prefill and of a decode step.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SETUP_FAILED 2
#define CALL_FAILED 3

typedef int32_t (*entry_fn)(const int64_t *, void *const *, char *, const int64_t *);
typedef int32_t (*set_threads_fn)(int32_t);

enum role { ROLE_SEQ, ROLE_PAST, ROLE_CAPACITY };
enum kind { KIND_INPUT, KIND_STATE, KIND_OUTPUT, KIND_WEIGHT, KIND_PACKED };

struct slot {
    enum kind kind;
    char *name;
    int64_t size;
    int64_t offset; /* in the blob: weight and packed only */
};

struct list { /* a growable array of elements of one size */
    void *items;
    size_t count, capacity, item_size;
};

struct manifest {
    char *library, *entry, *blob, *out_tokens, *out_logits, *logits_name;
    int64_t capacity, max_seq, threads, arena, vocab, decode;
    int has_header, logits_seq_major, has_threads, has_capacity, has_max_seq, has_arena,
        has_decode, has_logits, ended;
    struct list symbols;      /* enum role */
    struct list symbol_names; /* char * */
    struct list slots;        /* struct slot */
    struct list temps;        /* int64_t offsets */
    struct list requirements; /* char * */
    struct list launches;     /* char * */
    struct list prompt;       /* int64_t */
};

static const char *manifest_path = "?";
static size_t manifest_line = 0;

static void die(int status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("step_harness: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(status);
}

#define bad_line(...)                                                               \
    do {                                                                            \
        fprintf(stderr, "step_harness: %s:%zu: ", manifest_path, manifest_line);     \
        fprintf(stderr, __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                        \
        exit(SETUP_FAILED);                                                         \
    } while (0)

static void *checked_malloc(size_t size, const char *what) {
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        die(SETUP_FAILED, "out of memory: %s needs %zu bytes", what, size);
    return p;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *out = checked_malloc(n, "the manifest");
    memcpy(out, s, n);
    return out;
}

static void list_init(struct list *l, size_t item_size) {
    l->items = NULL;
    l->count = l->capacity = 0;
    l->item_size = item_size;
}

static void list_push(struct list *l, const void *item) {
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? 2 * l->capacity : 16;
        void *items = realloc(l->items, capacity * l->item_size);
        if (items == NULL)
            die(SETUP_FAILED, "out of memory reading the manifest");
        l->items = items;
        l->capacity = capacity;
    }
    memcpy((char *)l->items + l->count * l->item_size, item, l->item_size);
    l->count++;
}

#define AT(list, type, i) (((type *)(list).items)[i])

/* The next space-separated word of *cursor (NULL at the end of the line). */
static char *next_word(char **cursor) {
    char *p = *cursor;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return NULL;
    char *word = p;
    while (*p != '\0' && *p != ' ' && *p != '\t')
        p++;
    if (*p != '\0')
        *p++ = '\0';
    *cursor = p;
    return word;
}

static char *need_word(char **cursor, const char *keyword, const char *field) {
    char *word = next_word(cursor);
    if (word == NULL)
        bad_line("'%s' needs %s", keyword, field);
    return word;
}

/* The rest of the line, without leading and trailing spaces; never empty. */
static char *rest_of_line(char **cursor, const char *keyword, const char *field) {
    char *p = *cursor;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        p[--n] = '\0';
    if (n == 0)
        bad_line("'%s' needs %s", keyword, field);
    *cursor = p + n;
    return p;
}

static int64_t parse_int(const char *word, const char *keyword, int64_t low) {
    char *end = NULL;
    errno = 0;
    long long value = strtoll(word, &end, 10);
    if (errno != 0 || end == word || *end != '\0')
        bad_line("'%s': expected an integer, got '%s'", keyword, word);
    if (value < low)
        bad_line("'%s': expected an integer >= %lld, got %lld", keyword, (long long)low, value);
    return (int64_t)value;
}

static int64_t int_field(char **cursor, const char *keyword, const char *field, int64_t low) {
    return parse_int(need_word(cursor, keyword, field), keyword, low);
}

static void no_more(char **cursor, const char *keyword) {
    char *extra = next_word(cursor);
    if (extra != NULL)
        bad_line("'%s': unexpected field '%s'", keyword, extra);
}

static void set_once(int *flag, const char *keyword) {
    if (*flag)
        bad_line("'%s' given twice", keyword);
    *flag = 1;
}

static char *set_string_once(char *old, char **cursor, const char *keyword, const char *field,
                             int rest) {
    if (old != NULL)
        bad_line("'%s' given twice", keyword);
    char *value = rest ? rest_of_line(cursor, keyword, field) : need_word(cursor, keyword, field);
    if (!rest)
        no_more(cursor, keyword);
    return copy_string(value);
}

static void parse_directive(struct manifest *m, char *line) {
    char *cursor = line;
    char *keyword = next_word(&cursor);
    if (keyword == NULL || keyword[0] == '#')
        return;
    if (m->ended)
        bad_line("'%s' after 'end'", keyword);
    if (!m->has_header || strcmp(keyword, "nc-step-harness") == 0) {
        if (strcmp(keyword, "nc-step-harness") != 0 || m->has_header)
            bad_line("the first directive must be 'nc-step-harness 1'");
        m->has_header = 1;
        int64_t version = int_field(&cursor, keyword, "a version", 0);
        if (version != 1)
            bad_line("format version %lld is not 1", (long long)version);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "library") == 0) {
        m->library = set_string_once(m->library, &cursor, keyword, "a path", 1);
    } else if (strcmp(keyword, "entry") == 0) {
        m->entry = set_string_once(m->entry, &cursor, keyword, "a name", 0);
    } else if (strcmp(keyword, "blob") == 0) {
        m->blob = set_string_once(m->blob, &cursor, keyword, "a path", 1);
    } else if (strcmp(keyword, "out_tokens") == 0) {
        m->out_tokens = set_string_once(m->out_tokens, &cursor, keyword, "a path", 1);
    } else if (strcmp(keyword, "out_logits") == 0) {
        m->out_logits = set_string_once(m->out_logits, &cursor, keyword, "a path", 1);
    } else if (strcmp(keyword, "capacity") == 0) {
        set_once(&m->has_capacity, keyword);
        m->capacity = int_field(&cursor, keyword, "a count", 1);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "max_seq") == 0) {
        set_once(&m->has_max_seq, keyword);
        m->max_seq = int_field(&cursor, keyword, "a count", 1);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "threads") == 0) {
        set_once(&m->has_threads, keyword);
        m->threads = int_field(&cursor, keyword, "a count", 1);
        if (m->threads > 256)
            bad_line("'threads': at most 256, got %lld", (long long)m->threads);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "arena") == 0) {
        set_once(&m->has_arena, keyword);
        m->arena = int_field(&cursor, keyword, "a size", 0);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "decode") == 0) {
        set_once(&m->has_decode, keyword);
        m->decode = int_field(&cursor, keyword, "a count", 0);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "symbol") == 0) {
        char *name = need_word(&cursor, keyword, "a name");
        char *role_word = need_word(&cursor, keyword, "a role (seq, past or capacity)");
        no_more(&cursor, keyword);
        enum role role;
        if (strcmp(role_word, "seq") == 0)
            role = ROLE_SEQ;
        else if (strcmp(role_word, "past") == 0)
            role = ROLE_PAST;
        else if (strcmp(role_word, "capacity") == 0)
            role = ROLE_CAPACITY;
        else
            bad_line("symbol '%s': the role must be seq, past or capacity, got '%s'", name,
                     role_word);
        for (size_t i = 0; i < m->symbols.count; i++)
            if (role != ROLE_CAPACITY && AT(m->symbols, enum role, i) == role)
                bad_line("symbol '%s': a second symbol of role %s", name, role_word);
        char *copy = copy_string(name);
        list_push(&m->symbols, &role);
        list_push(&m->symbol_names, &copy);
    } else if (strcmp(keyword, "io") == 0) {
        struct slot s;
        char *kind = need_word(&cursor, keyword, "a kind");
        if (strcmp(kind, "input") == 0)
            s.kind = KIND_INPUT;
        else if (strcmp(kind, "state") == 0)
            s.kind = KIND_STATE;
        else if (strcmp(kind, "output") == 0)
            s.kind = KIND_OUTPUT;
        else if (strcmp(kind, "weight") == 0)
            s.kind = KIND_WEIGHT;
        else if (strcmp(kind, "packed") == 0)
            s.kind = KIND_PACKED;
        else
            bad_line("'io': the kind must be input, state, output, weight or packed, got '%s'",
                     kind);
        s.name = copy_string(need_word(&cursor, keyword, "a name"));
        s.size = int_field(&cursor, keyword, "a size", 0);
        s.offset = -1;
        if (s.kind == KIND_WEIGHT || s.kind == KIND_PACKED) {
            s.offset = int_field(&cursor, keyword, "a blob offset", 0);
            if (s.offset % 64 != 0)
                bad_line("io %s: blob offset %lld is not a multiple of 64", s.name,
                         (long long)s.offset);
        }
        no_more(&cursor, keyword);
        list_push(&m->slots, &s);
    } else if (strcmp(keyword, "logits") == 0) {
        set_once(&m->has_logits, keyword);
        m->logits_name = copy_string(need_word(&cursor, keyword, "an output name"));
        m->vocab = int_field(&cursor, keyword, "a row length", 1);
        char *form = need_word(&cursor, keyword, "a form (last or seq)");
        if (strcmp(form, "seq") == 0)
            m->logits_seq_major = 1;
        else if (strcmp(form, "last") != 0)
            bad_line("'logits': the form must be last or seq, got '%s'", form);
        no_more(&cursor, keyword);
    } else if (strcmp(keyword, "temp") == 0) {
        int64_t offset = int_field(&cursor, keyword, "an offset", 0);
        int64_t size = int_field(&cursor, keyword, "a size", 0);
        no_more(&cursor, keyword);
        if (!m->has_arena)
            bad_line("'temp' before 'arena'");
        if (offset % 64 != 0)
            bad_line("temp %zu: offset %lld is not a multiple of 64", m->temps.count,
                     (long long)offset);
        if (size > m->arena || offset > m->arena - size)
            bad_line("temp %zu: [%lld, +%lld) is outside the arena of %lld bytes",
                     m->temps.count, (long long)offset, (long long)size, (long long)m->arena);
        list_push(&m->temps, &offset);
    } else if (strcmp(keyword, "requirement") == 0) {
        char *copy = copy_string(rest_of_line(&cursor, keyword, "a message"));
        list_push(&m->requirements, &copy);
    } else if (strcmp(keyword, "launch") == 0) {
        char *copy = copy_string(need_word(&cursor, keyword, "a kernel name"));
        no_more(&cursor, keyword);
        list_push(&m->launches, &copy);
    } else if (strcmp(keyword, "prompt") == 0) {
        char *word;
        int any = 0;
        while ((word = next_word(&cursor)) != NULL) {
            int64_t id = parse_int(word, keyword, INT64_MIN);
            list_push(&m->prompt, &id);
            any = 1;
        }
        if (!any)
            bad_line("'prompt' needs token ids");
    } else if (strcmp(keyword, "end") == 0) {
        no_more(&cursor, keyword);
        m->ended = 1;
    } else {
        bad_line("unknown directive '%s'", keyword);
    }
}

static void read_manifest(struct manifest *m, const char *path) {
    memset(m, 0, sizeof *m);
    list_init(&m->symbols, sizeof(enum role));
    list_init(&m->symbol_names, sizeof(char *));
    list_init(&m->slots, sizeof(struct slot));
    list_init(&m->temps, sizeof(int64_t));
    list_init(&m->requirements, sizeof(char *));
    list_init(&m->launches, sizeof(char *));
    list_init(&m->prompt, sizeof(int64_t));
    manifest_path = path;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die(SETUP_FAILED, "cannot open the manifest %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    while ((n = getline(&line, &size, f)) >= 0) {
        manifest_line++;
        if ((size_t)n != strlen(line))
            bad_line("a NUL byte in the line");
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        parse_directive(m, line);
    }
    int failed = ferror(f);
    free(line);
    fclose(f);
    if (failed)
        die(SETUP_FAILED, "cannot read the manifest %s", path);
    if (manifest_line == 0)
        die(SETUP_FAILED, "%s: empty manifest", path);
    if (!m->ended)
        die(SETUP_FAILED, "%s: no 'end' line (a truncated manifest?)", path);
    const char *missing = m->library == NULL     ? "library"
                          : m->entry == NULL     ? "entry"
                          : m->blob == NULL      ? "blob"
                          : !m->has_capacity     ? "capacity"
                          : !m->has_max_seq      ? "max_seq"
                          : !m->has_arena        ? "arena"
                          : !m->has_logits       ? "logits"
                          : !m->has_decode       ? "decode"
                          : m->prompt.count == 0 ? "prompt"
                          : m->out_tokens == NULL ? "out_tokens"
                          : m->out_logits == NULL ? "out_logits"
                                                  : NULL;
    if (missing != NULL)
        die(SETUP_FAILED, "%s: no '%s' line", path, missing);
    int seq = 0, past = 0;
    for (size_t i = 0; i < m->symbols.count; i++) {
        seq += AT(m->symbols, enum role, i) == ROLE_SEQ;
        past += AT(m->symbols, enum role, i) == ROLE_PAST;
    }
    if (seq != 1 || past != 1)
        die(SETUP_FAILED, "%s: needs one symbol of role seq and one of role past", path);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* numpy.argmax of a float32 row: the first NaN, else the lowest index of the maximum. */
static int64_t argmax(const float *row, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(row[i]))
            return i;
        if (row[i] > row[best])
            best = i;
    }
    return best;
}

struct run {
    const struct manifest *m;
    entry_fn entry;
    int64_t *syms;
    void **io;
    char *arena;
    int64_t *offsets;
    int64_t *ids; /* the input slot's buffer */
    const float *logits;
    int64_t calls;
};

/* One call of the entry on ids[0..n) after `past` tokens; exits on a non-zero return. */
static void call(struct run *r, const int64_t *ids, int64_t n, int64_t past) {
    const struct manifest *m = r->m;
    memcpy(r->ids, ids, (size_t)n * sizeof *ids);
    for (size_t i = 0; i < m->symbols.count; i++) {
        enum role role = AT(m->symbols, enum role, i);
        r->syms[i] = role == ROLE_SEQ ? n : role == ROLE_PAST ? past : m->capacity;
    }
    int32_t rc = r->entry(r->syms, (void *const *)r->io, r->arena, r->offsets);
    r->calls++;
    if (rc == 0)
        return;
    char where[160];
    snprintf(where, sizeof where, "call %lld (seq=%lld, past=%lld, capacity=%lld)",
             (long long)r->calls, (long long)n, (long long)past, (long long)m->capacity);
    if (rc < 0) {
        int64_t k = -(int64_t)rc;
        const char *message = (size_t)k <= m->requirements.count
                                  ? AT(m->requirements, char *, k - 1)
                                  : "(not in the manifest)";
        die(CALL_FAILED, "nc_run_%s returned %d at %s: requirement %lld failed: %s", m->entry,
            (int)rc, where, (long long)k, message);
    }
    int64_t launch = rc / 256, code = rc % 256;
    const char *kernel = (size_t)launch < m->launches.count ? AT(m->launches, char *, launch)
                                                           : "?";
    die(CALL_FAILED, "nc_run_%s returned %d at %s: kernel @%s (launch %lld) failed check %lld",
        m->entry, (int)rc, where, kernel, (long long)launch, (long long)code);
}

static const float *last_row(const struct run *r, int64_t n) {
    return r->logits + (r->m->logits_seq_major ? (n - 1) * r->m->vocab : 0);
}

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        die(SETUP_FAILED, "cannot create %s: %s", path, strerror(errno));
    size_t written = size ? fwrite(data, 1, size, f) : 0;
    if (written != size || fclose(f) != 0)
        die(SETUP_FAILED, "cannot write %s", path);
}

static void *open_library(const struct manifest *m, entry_fn *entry) {
    void *library = dlopen(m->library, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL)
        die(SETUP_FAILED, "dlopen failed: %s", dlerror());
    char name[512];
    if ((size_t)snprintf(name, sizeof name, "nc_run_%s", m->entry) >= sizeof name)
        die(SETUP_FAILED, "entry name too long: %s", m->entry);
    dlerror();
    void *symbol = dlsym(library, name);
    if (symbol == NULL)
        die(SETUP_FAILED, "dlsym %s failed: %s", name, dlerror());
    memcpy(entry, &symbol, sizeof *entry); /* POSIX: a data pointer to a function */
    if (m->has_threads) {
        dlerror();
        void *setter = dlsym(library, "nc_pool_set_threads");
        if (setter == NULL) {
            if (m->threads != 1)
                die(SETUP_FAILED, "%s has no thread pool (nc_pool_set_threads): it runs on "
                    "one thread, not %lld", m->library, (long long)m->threads);
        } else {
            set_threads_fn set_threads;
            memcpy(&set_threads, &setter, sizeof set_threads);
            int32_t got = set_threads((int32_t)m->threads);
            if (got != m->threads)
                die(SETUP_FAILED, "nc_pool_set_threads(%lld) returned %d", (long long)m->threads,
                    (int)got);
        }
    }
    return library;
}

static const char *map_blob(const char *path, int64_t *size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(SETUP_FAILED, "cannot open the weight blob %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0)
        die(SETUP_FAILED, "cannot stat %s: %s", path, strerror(errno));
    *size = (int64_t)st.st_size;
    if (st.st_size == 0) {
        close(fd);
        return NULL;
    }
    void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED)
        die(SETUP_FAILED, "cannot mmap %s: %s", path, strerror(errno));
    close(fd);
    return data;
}

static void *zeroed(int64_t size, const char *what, const char *name) {
    void *p = calloc(1, size ? (size_t)size : 1);
    if (p == NULL)
        die(SETUP_FAILED, "out of memory: %s '%s' needs %lld bytes", what, name, (long long)size);
    return p;
}

static void free_strings(struct list *l) {
    for (size_t i = 0; i < l->count; i++)
        free(AT(*l, char *, i));
    free(l->items);
}

/* Everything main allocated (a clean exit under LeakSanitizer). */
static void free_run(struct manifest *m, struct run *r, const char *blob, int64_t blob_size) {
    for (size_t i = 0; i < m->slots.count; i++) {
        struct slot *s = &AT(m->slots, struct slot, i);
        if (s->kind != KIND_WEIGHT && s->kind != KIND_PACKED)
            free(r->io[i]);
        free(s->name);
    }
    if (blob != NULL)
        munmap((void *)blob, (size_t)blob_size);
    free(r->syms);
    free(r->io);
    free(r->offsets);
    free(r->arena);
    free(m->slots.items);
    free(m->symbols.items);
    free(m->temps.items);
    free(m->prompt.items);
    free_strings(&m->symbol_names);
    free_strings(&m->requirements);
    free_strings(&m->launches);
    char *strings[] = {m->library, m->entry, m->blob, m->out_tokens, m->out_logits,
                       m->logits_name};
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
        free(strings[i]);
}

int main(int argc, char **argv) {
    if (argc != 2)
        die(SETUP_FAILED, "usage: step_harness MANIFEST");
    struct manifest m;
    read_manifest(&m, argv[1]);

    int64_t blob_size = 0;
    const char *blob = map_blob(m.blob, &blob_size);
    struct run r = {0};
    r.m = &m;
    r.syms = checked_malloc(m.symbols.count * sizeof(int64_t), "the symbols");
    r.io = checked_malloc(m.slots.count * sizeof(void *), "the io array");
    r.offsets = checked_malloc(m.temps.count * sizeof(int64_t), "the temp offsets");
    for (size_t i = 0; i < m.temps.count; i++)
        r.offsets[i] = AT(m.temps, int64_t, i);
    int inputs = 0;
    for (size_t i = 0; i < m.slots.count; i++) {
        struct slot *s = &AT(m.slots, struct slot, i);
        switch (s->kind) {
        case KIND_WEIGHT:
        case KIND_PACKED:
            if (s->size > blob_size || s->offset > blob_size - s->size)
                die(SETUP_FAILED, "io %s: [%lld, +%lld) is past the end of %s (%lld bytes)",
                    s->name, (long long)s->offset, (long long)s->size, m.blob,
                    (long long)blob_size);
            r.io[i] = (void *)(blob + s->offset); /* read-only mapping: kernels only read */
            break;
        case KIND_INPUT:
            if (++inputs > 1)
                die(SETUP_FAILED, "io %s: a second input (a step takes one: the token ids)",
                    s->name);
            if (s->size != m.max_seq * (int64_t)sizeof(int64_t))
                die(SETUP_FAILED, "io %s: %lld bytes, but max_seq %lld token ids take %lld",
                    s->name, (long long)s->size, (long long)m.max_seq,
                    (long long)(m.max_seq * (int64_t)sizeof(int64_t)));
            r.ids = zeroed(s->size, "input", s->name);
            r.io[i] = r.ids;
            break;
        case KIND_STATE:
            r.io[i] = zeroed(s->size, "state", s->name);
            break;
        case KIND_OUTPUT: {
            r.io[i] = zeroed(s->size, "output", s->name);
            if (strcmp(s->name, m.logits_name) == 0) {
                int64_t rows = m.logits_seq_major ? m.max_seq : 1;
                if (s->size != rows * m.vocab * (int64_t)sizeof(float))
                    die(SETUP_FAILED, "output %s: %lld bytes, but %lld rows of %lld f32 take %lld",
                        s->name, (long long)s->size, (long long)rows, (long long)m.vocab,
                        (long long)(rows * m.vocab * (int64_t)sizeof(float)));
                r.logits = r.io[i];
            }
            break;
        }
        }
    }
    if (inputs != 1)
        die(SETUP_FAILED, "%s: no io slot of kind input (the token ids)", argv[1]);
    if (r.logits == NULL)
        die(SETUP_FAILED, "%s: the logits '%s' are no output slot", argv[1], m.logits_name);
    int64_t arena_size = (m.arena + 63) / 64 * 64 + 64;
    r.arena = aligned_alloc(64, (size_t)arena_size);
    if (r.arena == NULL)
        die(SETUP_FAILED, "out of memory: the arena needs %lld bytes", (long long)arena_size);
    memset(r.arena, 0, (size_t)arena_size);
    void *library = open_library(&m, &r.entry);

    int64_t n_prompt = (int64_t)m.prompt.count, steps = m.decode + 1;
    int64_t *tokens = checked_malloc((size_t)steps * sizeof(int64_t), "the tokens");
    float *rows = checked_malloc((size_t)(steps * m.vocab) * sizeof(float), "the logits rows");
    const int64_t *prompt = m.prompt.items;
    double start = now_ms();
    int64_t n = 0;
    for (int64_t past = 0; past < n_prompt; past += n) {
        n = n_prompt - past < m.max_seq ? n_prompt - past : m.max_seq;
        call(&r, prompt + past, n, past);
    }
    double prefilled = now_ms();
    int64_t position = n_prompt;
    for (int64_t step = 0;; step++) {
        const float *row = last_row(&r, step == 0 ? n : 1);
        memcpy(rows + step * m.vocab, row, (size_t)m.vocab * sizeof(float));
        tokens[step] = argmax(row, m.vocab);
        if (step == m.decode)
            break;
        call(&r, &tokens[step], 1, position);
        position++;
    }
    double done = now_ms();

    size_t text_size = (size_t)steps * 24 + 1, used = 0;
    char *text = checked_malloc(text_size, "the tokens' text");
    for (int64_t i = 0; i < steps; i++)
        used += (size_t)snprintf(text + used, text_size - used, "%lld\n", (long long)tokens[i]);
    write_file(m.out_tokens, text, used);
    write_file(m.out_logits, rows, (size_t)(steps * m.vocab) * sizeof(float));
    printf("calls %lld prefill_tokens %lld prefill_ms %.3f decode_steps %lld "
           "decode_ms_per_step %.3f\n",
           (long long)r.calls, (long long)n_prompt, prefilled - start, (long long)m.decode,
           m.decode ? (done - prefilled) / (double)m.decode : 0.0);
    dlclose(library);
    free_run(&m, &r, blob, blob_size);
    free(tokens);
    free(rows);
    free(text);
    return 0;
}
