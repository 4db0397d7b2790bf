#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/text.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ft_log_fn handler;
static void *handler_user;

void ft_set_log_handler(ft_log_fn fn, void *user)
{
    pthread_mutex_lock(&lock);
    handler = fn;
    handler_user = user;
    pthread_mutex_unlock(&lock);
}

void ft__log(int level, const char *fmt, ...)
{
    char line[1024];
    ft_log_fn fn;
    void *user;
    va_list ap;

    pthread_mutex_lock(&lock);
    fn = handler;
    user = handler_user;
    pthread_mutex_unlock(&lock);
    if (fn == NULL && level == FT_LOG_DEBUG && !ft__env_on("FLASHTUNE_DEBUG"))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (fn != NULL)
        fn(user, level, line);
    else
        fprintf(stderr, "flashtune: %s\n", line);
}
