package queuebox

/*
#include <stdlib.h>
#include "queuebox.h"
*/
import "C"

import "unsafe"

// The native calls of the application's own transaction (bindings/c/src/app_tx.rs): the
// core renders the statements, this package runs them on the application's driver. None
// of them blocks or needs a runtime.

// taskCompletionStatement renders the task's fenced completion ({"sql", "params",
// "expect"}); from then on the core leaves the completion to the application.
func taskCompletionStatement(t *C.QbTask, placeholder string) (string, error) {
	cplaceholder := cstr(placeholder)
	defer C.free(unsafe.Pointer(cplaceholder))
	var out *C.char
	var e *C.QbError
	err := check(C.qb_task_completion_statement(t, cplaceholder, &out, &e), e)
	return takeString(out), err
}

// taskClaimLost tells the core the application's completion matched no row; the core
// counts and logs the loss and returns the ErrClaimLost error to raise.
func taskClaimLost(t *C.QbTask) error {
	var e *C.QbError
	return check(C.qb_task_claim_lost(t, &e), e)
}

// publishStatement renders the outbox insert of messagesJSON for PostgreSQL ({"sql",
// "params", "expect", "ids"}).
func publishStatement(messagesJSON, placeholder string) (string, error) {
	cmessages, cplaceholder := cstr(messagesJSON), cstr(placeholder)
	defer C.free(unsafe.Pointer(cmessages))
	defer C.free(unsafe.Pointer(cplaceholder))
	var out *C.char
	var e *C.QbError
	// A NULL backend is PostgreSQL, the database the worker and both Executor shapes use.
	err := check(C.qb_publish_statement(nil, cmessages, cplaceholder, &out, &e), e)
	return takeString(out), err
}

// enqueueStatement renders the pull-row enqueue of messagesJSON for PostgreSQL ({"sql",
// "params", "expect": "enqueue_rows"}); the ids come back in the statement's result rows.
func enqueueStatement(messagesJSON, placeholder string) (string, error) {
	cmessages, cplaceholder := cstr(messagesJSON), cstr(placeholder)
	defer C.free(unsafe.Pointer(cmessages))
	defer C.free(unsafe.Pointer(cplaceholder))
	var out *C.char
	var e *C.QbError
	err := check(C.qb_enqueue_statement(nil, cmessages, cplaceholder, &out, &e), e)
	return takeString(out), err
}
