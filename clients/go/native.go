package queuebox

/*
#cgo CFLAGS: -I${SRCDIR}
// -lgcc_s: the unwinder Rust's standard library calls (rustc --print native-static-libs);
// gcc links it by itself, a cross compiler such as zig cc only when asked.
#cgo LDFLAGS: -lqueuebox -lm -ldl -lpthread -lgcc_s
#cgo linux,amd64 LDFLAGS: -L${SRCDIR}/lib/linux_amd64
#cgo linux,arm64 LDFLAGS: -L${SRCDIR}/lib/linux_arm64
#include <stdlib.h>
#include "queuebox.h"
*/
import "C"

import (
	"time"
	"unsafe"
)

// queuebox.h is a copy of bindings/c/include/queuebox.h kept inside the module so that the
// package compiles after `go get` (scripts/test.d/31-go.sh fails when the copy is stale).
// The released module (scripts/package.sh) also carries lib/<goos>_<goarch>/libqueuebox.a,
// the static library for that platform, selected by the build-tag LDFLAGS above; in this
// repository lib/ is absent and CGO_LDFLAGS points at a cargo build instead.

// The native library (bindings/c, libqueuebox) does all the work: claims, lease renewal,
// LISTEN/NOTIFY, backoff, fencing, completion. This file is the only place that talks to
// it (batch.go holds the batched hand-out and completion). Calls that wait use a *_blocking
// variant: a goroutine blocked in cgo costs one OS thread and never blocks the Go
// scheduler, and no state lives in thread-locals, so a goroutine may move between OS
// threads between two calls. The one exception never waits: the cancellation callback
// (qb_task_on_cancelled, batch.go).

// cstr copies s into C memory; the caller frees it with C.free.
func cstr(s string) *C.char { return C.CString(s) }

// takeString copies a library-allocated string into Go and frees it.
func takeString(p *C.char) string {
	if p == nil {
		return ""
	}
	s := C.GoString(p)
	C.qb_string_free(p)
	return s
}

// check turns a status and its error object into a Go error, freeing the object.
func check(st C.QbStatus, e *C.QbError) error {
	if st == C.QB_OK {
		C.qb_error_free(e)
		return nil
	}
	err := &Error{Kind: ErrorKind(st)}
	if e != nil {
		if e.code != nil {
			err.Code = C.GoString(e.code)
		}
		if e.message != nil {
			err.Message = C.GoString(e.message)
		}
		C.qb_error_free(e)
	}
	if err.Message == "" {
		err.Message = C.GoString(C.qb_status_name(C.int32_t(st)))
	}
	return err
}

type nativeRuntime struct{ p *C.QbRuntime }

func newRuntime(threads int) (*nativeRuntime, error) {
	var rt *C.QbRuntime
	var e *C.QbError
	if err := check(C.qb_runtime_new(C.uint32_t(threads), &rt, &e), e); err != nil {
		return nil, err
	}
	return &nativeRuntime{p: rt}, nil
}

func (r *nativeRuntime) free() {
	if r != nil && r.p != nil {
		C.qb_runtime_free(r.p)
		r.p = nil
	}
}

func nativeMigrate(r *nativeRuntime, url string) (string, error) {
	curl := cstr(url)
	defer C.free(unsafe.Pointer(curl))
	var report *C.char
	var e *C.QbError
	err := check(C.qb_migrate_blocking(r.p, curl, &report, &e), e)
	return takeString(report), err
}

func nativeWorkerNew(r *nativeRuntime, url, optionsJSON string) (*C.QbWorker, error) {
	curl, copts := cstr(url), cstr(optionsJSON)
	defer C.free(unsafe.Pointer(curl))
	defer C.free(unsafe.Pointer(copts))
	var w *C.QbWorker
	var e *C.QbError
	if err := check(C.qb_worker_new_blocking(r.p, curl, copts, &w, &e), e); err != nil {
		return nil, err
	}
	return w, nil
}

func nativeShutdown(w *C.QbWorker) (uint64, error) {
	var n C.uint64_t
	var e *C.QbError
	err := check(C.qb_worker_shutdown_blocking(w, &n, &e), e)
	return uint64(n), err
}

func nativeStats(w *C.QbWorker) Stats {
	var s C.QbStats
	var e *C.QbError
	if check(C.qb_worker_stats(w, &s, &e), e) != nil {
		return Stats{}
	}
	return Stats{
		Claimed: uint64(s.claimed), Completed: uint64(s.completed), Retried: uint64(s.retried),
		Dead: uint64(s.dead), Released: uint64(s.released), ClaimsLost: uint64(s.claims_lost),
		ClaimErrors: uint64(s.claim_errors), InFlight: uint64(s.in_flight),
	}
}

func taskExecute(t *C.QbTask, sql, params string) (int64, error) {
	csql, cparams := cstr(sql), cstr(params)
	defer C.free(unsafe.Pointer(csql))
	defer C.free(unsafe.Pointer(cparams))
	var n C.uint64_t
	var e *C.QbError
	err := check(C.qb_task_execute_blocking(t, csql, cparams, &n, &e), e)
	return int64(n), err
}

func taskQuery(t *C.QbTask, sql, params string) (string, error) {
	csql, cparams := cstr(sql), cstr(params)
	defer C.free(unsafe.Pointer(csql))
	defer C.free(unsafe.Pointer(cparams))
	var rows *C.char
	var e *C.QbError
	err := check(C.qb_task_query_blocking(t, csql, cparams, &rows, &e), e)
	return takeString(rows), err
}

func taskFail(t *C.QbTask, text string) error {
	ctext := cstr(text)
	defer C.free(unsafe.Pointer(ctext))
	var e *C.QbError
	return check(C.qb_task_fail_blocking(t, ctext, &e), e)
}

func taskRetry(t *C.QbTask, delayMS uint64, text string) error {
	ctext := cstr(text)
	defer C.free(unsafe.Pointer(ctext))
	var e *C.QbError
	return check(C.qb_task_retry_blocking(t, C.uint64_t(delayMS), ctext, &e), e)
}

func taskDead(t *C.QbTask, reason string) error {
	creason := cstr(reason)
	defer C.free(unsafe.Pointer(creason))
	var e *C.QbError
	return check(C.qb_task_dead_blocking(t, creason, &e), e)
}

func taskAbandon(t *C.QbTask) error {
	var e *C.QbError
	return check(C.qb_task_abandon_blocking(t, &e), e)
}

func taskRelease(t *C.QbTask) error {
	var e *C.QbError
	return check(C.qb_task_release_blocking(t, &e), e)
}

func taskFree(t *C.QbTask) { C.qb_task_free(t) }

// nativeHandlersTook tells the core how long n handlers ran in all (qb_worker_handlers_took).
func nativeHandlersTook(w *C.QbWorker, n int64, total time.Duration) {
	var e *C.QbError
	_ = check(C.qb_worker_handlers_took(w, C.uint64_t(n), C.double(total.Seconds()), &e), e)
}

func workerFree(w *C.QbWorker) { C.qb_worker_free(w) }

func conformanceEvaluate(kind, input string) (string, error) {
	ckind, cinput := cstr(kind), cstr(input)
	defer C.free(unsafe.Pointer(ckind))
	defer C.free(unsafe.Pointer(cinput))
	var out *C.char
	var e *C.QbError
	err := check(C.qb_conformance_evaluate(ckind, cinput, &out, &e), e)
	return takeString(out), err
}

func libraryVersion() string { return C.GoString(C.qb_version()) }
