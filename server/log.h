/*
 * log.h - one event a line on stderr: "ts level module key=value ...".
 * The level is checked before anything is formatted.
 */
#ifndef MIRADB_LOG_H
#define MIRADB_LOG_H

enum log_level {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
};

extern int log_min_level;

void log_set_level(enum log_level l);
void log_emit(enum log_level l, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_at(l, mod, ...)                                                                        \
    do {                                                                                           \
        if ((int)(l) >= log_min_level) {                                                           \
            log_emit((l), (mod), __VA_ARGS__);                                                     \
        }                                                                                          \
    } while (0)
#define log_debug(mod, ...) log_at(LOG_DEBUG, mod, __VA_ARGS__)
#define log_info(mod, ...) log_at(LOG_INFO, mod, __VA_ARGS__)
#define log_warn(mod, ...) log_at(LOG_WARN, mod, __VA_ARGS__)
#define log_error(mod, ...) log_at(LOG_ERROR, mod, __VA_ARGS__)

#endif
