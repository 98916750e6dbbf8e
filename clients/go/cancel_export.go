package queuebox

/*
#include <stdbool.h>
*/
import "C"

import "unsafe"

// queueboxGoTaskCancelled is the callback of qb_task_on_cancelled (batch.go); user_data is
// the integer key watchCancelled registered, never a Go pointer. It runs on a runtime
// thread of the library and only looks up and calls a context.CancelFunc.
//
//export queueboxGoTaskCancelled
func queueboxGoTaskCancelled(userData unsafe.Pointer, cancelled C.bool) {
	taskCancelled(uint64(uintptr(userData)), bool(cancelled))
}
