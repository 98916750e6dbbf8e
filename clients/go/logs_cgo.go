package queuebox

/*
#include "queuebox.h"

// The exported Go function (logs.go) takes plain char pointers; the library's callback type
// has const ones. This trampoline is the function pointer handed to qb_set_log_callback.
// (A file with //export may only declare C functions, so the definition lives here.)
extern void queueboxGoLog(void *user_data, int level, char *target, char *message, char *fields);

static void qb_go_log_trampoline(void *user_data, QbLogLevel level, const char *target,
                                 const char *message, const char *fields) {
	queueboxGoLog(user_data, (int)level, (char *)target, (char *)message, (char *)fields);
}

static QbStatus qb_go_set_log_callback(int32_t min_level, QbError **out_error) {
	return qb_set_log_callback(qb_go_log_trampoline, NULL, min_level, out_error);
}
*/
import "C"

// setNativeLogLevel installs the trampoline for records at minLevel (a QbLogLevel) and more
// severe. The level filter runs in the library: a disabled record never reaches Go.
func setNativeLogLevel(minLevel int) error {
	var e *C.QbError
	return check(C.qb_go_set_log_callback(C.int32_t(minLevel), &e), e)
}
